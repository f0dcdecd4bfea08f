"""The headroom search tells tight recipes by their memory figures (``estimator.memory_figures``)
instead of estimating them: the figures must be the estimate's own, and the options the same."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from optimizer.candidates import fitting
from optimizer.candidates.headroom import _safe, is_safe, safer
from optimizer.errors import GpucostError
from optimizer.estimator.estimate import clear_cache, estimate, memory_figures
from optimizer.estimator.gpus import gpu_names
from optimizer.estimator.workload import Constraints, Workload
from optimizer.quote import quote
from tests.unit.plan_workloads import WORKLOADS, bundled, served_offers

GPUS = ["T4", "V100", "A10G", "L4", "RTX4090", "A100", "A100-80GB", "H100", "MI300X"]
RECIPES = [(1, False), (4, False), (2, True), (16, True)]


def _concrete(w: Workload, micro: int, ckpt: bool) -> Workload:
    return w.model_copy(update={"micro_batch_size": micro, "gradient_checkpointing": ckpt,
                                "gradient_accumulation_steps": 2})


def is_safe_figures(f: Any, margin: float | None) -> bool:
    return bool(_safe(f.point_gb, f.upper_gb, f.usable_gb, margin))


def _upper(est: Any) -> float:
    return float(est.range["total_per_gpu"][1])


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: f"{w.model}-{w.method}")
def test_figures_are_the_estimates_own(w: Workload) -> None:
    gpus = [g for g in GPUS if g in gpu_names()]
    assert len(gpus) >= 7
    told = 0
    for gpu, count, sharding, (micro, ckpt) in itertools.product(gpus, (1, 2, 8), (None, "zero2", "auto"), RECIPES):
        cw = _concrete(w, micro, ckpt)
        seen = memory_figures(cw, gpu, count, sharding)
        try:
            est = estimate(cw, gpu, count, sharding)
        except GpucostError:
            # What the estimate refuses, the figures never answer for it.
            assert seen is None
            continue
        if (sharding or cw.sharding) == "auto" and count > 1:
            assert seen is None  # the estimate chooses the scheme: only it can tell
            continue
        assert seen is not None
        told += 1
        assert (seen.point_gb, seen.upper_gb, seen.fits) == (est.memory_gb.total_per_gpu, _upper(est), est.fits)
        assert seen.usable_gb == est.details["usable_vram_gb"]
        assert seen.tokens_per_second() == est.tokens_per_second
    assert told > 50


def test_a_recipe_left_to_choose_gets_no_figures() -> None:
    w = Workload(model="qwen2.5-1.5b", method="lora", tokens=1e8)
    assert memory_figures(w, "A100", 1, None) is None  # micro-batch and checkpointing "auto"
    assert memory_figures(_concrete(w, 4, False), "A100", 1, None) is not None
    assert memory_figures(_concrete(w, 4, False), "no-such-card", 1, None) is None


def _quote(w: Workload, c: Constraints) -> dict[str, Any]:
    q = quote(w, c, served_offers(c), bundled()[1], prices_as_of={}, snapshot_id="t")
    return q.model_dump(exclude={"solver": {"seconds"}})


CASES = [
    (Workload(model={"params_b": 2.31, "name": "new-2"}, method="full", tokens=1e8), Constraints()),
    (Workload(model={"params_b": 0.77, "name": "new-1"}, method="full", tokens=1e8, seq_len=4096),
     Constraints(safety_margin=0.1)),
    (Workload(model="llama-3-8b", method="lora", tokens=1e8), Constraints(safety_margin=0.25)),
    (Workload(model="qwen2.5-7b", method="full", tokens=5e7, seq_len=1024), Constraints(allow_spot=True)),
    (Workload(model="gpt2", method="full", tokens=1e9, seq_len=2048), Constraints()),
]


@pytest.mark.parametrize(("w", "c"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_quotes_are_the_same_with_or_without_the_figures(
    w: Workload, c: Constraints, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bool] = []
    real = fitting.memory_figures

    def counted(*args: Any) -> Any:
        got = real(*args)
        asked.append(got is not None)
        return got

    clear_cache()
    monkeypatch.setattr(fitting, "memory_figures", counted)
    with_figures = _quote(w, c)
    clear_cache()
    monkeypatch.setattr(fitting, "memory_figures", lambda *_: None)  # every recipe tried is estimated
    without = _quote(w, c)
    clear_cache()
    assert with_figures == without
    assert with_figures["best"] is not None
    assert any(asked)  # the headroom search ran, and the figures answered it


@pytest.mark.python_only  # patches or subclasses what compiled code calls directly
@pytest.mark.parametrize("margin", [None, 0.1])
def test_the_safer_recipe_is_the_same_with_or_without_the_figures(margin: float | None) -> None:
    """On every tight estimate of the workloads over cards and counts, with the recipe left to
    choose: the same recipe, or none, and among them cases where more than one was safe (the
    fastest is taken)."""
    from optimizer.candidates.estimator import _estimate, default_estimator

    def call(w: Workload, gpu: str, count: int, s: str | None) -> Any:
        return _estimate(default_estimator(), w, gpu, count, s)

    tight = several = 0
    for w in WORKLOADS:
        free = w.model_copy(update={"micro_batch_size": "auto", "gradient_checkpointing": "auto",
                                    "gradient_accumulation_steps": None})
        for gpu, count in itertools.product([g for g in GPUS if g in gpu_names()], (1, 2, 4)):
            try:
                est = estimate(free, gpu, count)
            except GpucostError:
                continue
            if not est.fits or is_safe(est, margin):
                continue
            tight += 1
            safe: list[float] = []

            def noted(*args: Any, safe: list[float] = safe) -> Any:
                got = memory_figures(*args)
                if got is not None and got.fits and is_safe_figures(got, margin):
                    safe.append(got.tokens_per_second())
                return got

            told = safer(call, free, est, count, est.sharding, margin, noted)
            made = safer(call, free, est, count, est.sharding, margin, None)
            want = _fastest_safe(call, free, est, count, margin)
            assert (told.model_dump() if told else None) == (made.model_dump() if made else None)
            assert (told.recipe.model_dump() if told else None) == want
            # Figures that are not the estimate's own (here: every recipe safe and fastest) are
            # caught when the chosen one is estimated, and the search runs without them.
            lied = safer(call, free, est, count, est.sharding, margin, _lying)
            assert (lied.model_dump() if lied else None) == (made.model_dump() if made else None)
            several += len(safe) > 1
    assert tight >= 10
    assert several >= 1


def _lying(*args: Any) -> Any:
    got = memory_figures(*args)
    if got is None:
        return None

    class Lie:
        point_gb, upper_gb, usable_gb, fits = 0.0, 0.0, got.usable_gb, True

        def tokens_per_second(self) -> float:
            return 1e12

    return Lie()


def _fastest_safe(call: Any, w: Workload, est: Any, count: int, margin: float | None) -> dict[str, Any] | None:
    """The rule, spelled out: of the recipes with less memory, each estimated, the first of the
    fastest safe ones (one per checkpointing choice: its largest safe micro-batch)."""
    from optimizer.candidates.headroom import _tries
    from optimizer.estimator.recipe import concrete_workload

    found: list[Any] = []
    done: set[bool] = set()
    for micro, ckpt in _tries(w, est):
        if ckpt in done:
            continue
        trial = call(concrete_workload(w, est.recipe.data_parallel_gpus, micro, ckpt), est.gpu, count, est.sharding)
        if not isinstance(trial, str) and trial.fits and is_safe(trial, margin):
            found.append(trial)
            done.add(ckpt)
    if not found:
        return None
    best = max(found, key=lambda e: e.tokens_per_second)
    return best.recipe.model_copy(update={"chosen": est.recipe.chosen}).model_dump()
