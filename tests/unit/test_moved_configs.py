"""A group's kept configurations moved to another amount of training (``candidates.amounts``) are
the configurations ``cloud._configs`` makes for that amount cold, field for field, on a grid of
workloads x amounts x every (GPU, GPUs per node) group of the bundled catalog; and an entry whose
figures the move cannot reproduce is made anew instead of moved."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import pytest

from optimizer.candidates import cloud
from optimizer.candidates.amount_rows import BATCH_AFTER
from optimizer.candidates.amounts import MOVED_FIELDS, KeptMoves, amount_key
from optimizer.candidates.estimator import default_estimator, default_shardings
from optimizer.candidates.rejections import RejectionTally
from optimizer.candidates.types import MAX_TOTAL_GPUS, CostAssumptions
from optimizer.estimator.estimate import clear_cache
from optimizer.estimator.workload import Constraints, Workload
from tests.unit.plan_workloads import WORKLOADS, served_offers

AMOUNTS = ("tokens", "samples", "dataset_tokens", "dataset_samples")
# From a few minutes to days of training: across one-hour runs (the checkpoint count) and past the
# 64 GB dataset-cache cap (host RAM), the figures that are not multiples of the amount.
FACTORS = (0.004, 0.6, 45.0, 700.0)
MAX_NODES = CostAssumptions().max_nodes


def _scaled(w: Workload, factor: float) -> Workload:
    name = next(n for n in AMOUNTS if getattr(w, n) is not None)
    return w.model_copy(update={name: getattr(w, name) * factor})


def _groups() -> list[Any]:
    c = Constraints()
    return list(cloud._filter_offers(served_offers(c), c, RejectionTally()).values())


def _make(w: Workload, g: Any, setup_hours: float | None, calls: list[int] | None = None) -> Any:
    def make(memo: dict[Any, Any]) -> list[Any]:
        if calls is not None:
            calls.append(1)
        return cloud._configs(
            w, g.gpu, g.gpus_per_node, g.vram_gb, estimator=default_estimator(), shardings=default_shardings(),
            max_nodes=MAX_NODES, max_gpus=MAX_TOTAL_GPUS, quota=None, memo=memo, fabric=g.fabric,
            setup_hours=setup_hours,
        )

    return make


def _key(w: Workload, g: Any, setup_hours: float | None) -> tuple[object, ...]:
    return (amount_key(w), g.gpu, g.gpus_per_node, g.vram_gb, MAX_NODES, MAX_TOTAL_GPUS, None, g.fabric,
            setup_hours, None)


def _read(c: Any) -> dict[str, Any]:
    """What option generation reads of a configuration: every field (but the estimate it was made
    from), and of a rejected one only its reason and what it is (its hours and host needs are not
    read, so they are not moved either)."""
    fields = {f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name != "source"}
    if c.reason is not None:
        for name in MOVED_FIELDS:
            fields.pop(name)
    return fields


@pytest.mark.parametrize("setup_hours", [None, 0.25])
@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: f"{w.model}-{w.method}")
def test_moved_configurations_are_the_cold_ones_on_a_grid(w: Workload, setup_hours: float | None) -> None:
    groups = _groups()
    others = [_scaled(w, f) for f in FACTORS]
    cold = []
    for other in others:
        clear_cache()  # every estimate and configuration made for this amount alone
        cold.append([_make(other, g, setup_hours)({}) for g in groups])
    clear_cache()
    kept = [cloud._kept(_key(w, g, setup_hours), _make(w, g, setup_hours), {}, w, g.gpus_per_node, setup_hours)
            for g in groups]
    moved_any = 0
    for other, want in zip(others, cold, strict=True):
        calls: list[int] = []
        got = [cloud._kept(_key(other, g, setup_hours), _make(other, g, setup_hours, calls), {}, other,
                           g.gpus_per_node, setup_hours) for g in groups]
        assert not calls, "every kept entry moved; none was made anew"
        for g, mine, theirs, before in zip(groups, got, want, kept, strict=True):
            assert [_read(c) for c in mine] == [_read(c) for c in theirs], (g.gpu, g.gpus_per_node)
            moved_any += sum(a.train_hours != b.train_hours for a, b in zip(mine, before, strict=True))
    assert moved_any > 0  # the amounts did change the hours: the grid compares moved figures
    # After the first few groups of each amount, the rest were moved by the workload's rows
    # (``amount_rows``), and every group found them to be its own figures. (From Python 3.12 ``sum``
    # compensates its rounding, which the rows' left-to-right sums do not: a group whose figures
    # differ by that refuses the rows, and the configurations above are still the cold ones.)
    movable = [m for m in (cloud._CONFIGS.get_or_compute(_key(w, g, setup_hours), _unreachable)[3]
                           for g in groups) if m._bases]
    if sys.version_info < (3, 12):
        assert not any(m._trusted is False for m in movable)
        assert sum(m._trusted is True for m in movable) == max(0, len(movable) - BATCH_AFTER)
    else:
        assert sum(m._trusted is not None for m in movable) == max(0, len(movable) - BATCH_AFTER)


def _unreachable() -> Any:
    raise AssertionError("the entry is kept")


def test_an_entry_whose_figures_the_move_does_not_reproduce_is_not_moved() -> None:
    clear_cache()
    w = Workload(model="qwen2.5-0.5b", method="lora", tokens=2e7)
    g = next(g for g in _groups() if g.gpu == "A100" and g.gpus_per_node == 8)
    cfgs = _make(w, g, None)({})
    live = next(i for i, c in enumerate(cfgs) if c.reason is None)
    other = _scaled(w, 3.0)
    assert KeptMoves(cfgs, w, g.gpus_per_node, None).at(other) is not None
    # A configuration whose hours are not what its estimate gives (as if ``_configs`` changed how it
    # takes them and the move did not follow): the entry is refused, not moved wrongly.
    off = list(cfgs)
    off[live] = dataclasses.replace(cfgs[live], train_hours=cfgs[live].train_hours * 1.001)
    assert KeptMoves(off, w, g.gpus_per_node, None).at(other) is None
    assert set(MOVED_FIELDS) <= {f.name for f in dataclasses.fields(cfgs[live])}


def test_a_moved_configuration_keeps_every_field_but_the_moved_ones() -> None:
    # A field added to ``_Config`` and not to ``_Config.moved`` would come back as its default, so
    # every field is given a value other than its default, of the type a real configuration holds
    # there (the compiled class checks them; its fields' annotations do not say).
    clear_cache()
    w = Workload(model="qwen2.5-0.5b", method="lora", tokens=2e7)
    g = next(g for g in _groups() if g.gpu == "A100" and g.gpus_per_node == 8)
    real = next(c for c in _make(w, g, None)({}) if c.reason is None and c.recipe is not None)
    given: dict[str, Any] = {}
    for i, f in enumerate(dataclasses.fields(cloud._Config)):
        held = getattr(real, f.name)
        if f.name in ("recipe", "source"):
            given[f.name] = held
        elif held is None or isinstance(held, str):  # ``reason``, ``measurement_id``: str or None
            given[f.name] = f"value {i}"
        elif isinstance(held, bool):
            given[f.name] = not held
        elif isinstance(held, tuple):
            given[f.name] = ("a warning",)
        else:
            given[f.name] = type(held)(100 + i)  # int or float
        assert given[f.name] is not None and given[f.name] != f.default, f.name
    new = {name: 0.5 + i for i, name in enumerate(MOVED_FIELDS)}
    got = cloud._Config(**given).moved(*new.values())
    assert type(got) is cloud._Config
    for f in dataclasses.fields(cloud._Config):
        assert getattr(got, f.name) == new.get(f.name, given[f.name]), f.name
    assert got.source is real.source


# Local builds under a safety margin, and under a deadline and a budget (rejections that follow the
# moved hours: a build's lead time plus the run, the cash for energy and machines).
LOCAL_CONSTRAINTS = {
    "plain": Constraints(),
    "margin": Constraints(safety_margin=0.15),
    "deadline-budget": Constraints(deadline_hours=24 * 9, budget_usd=2500.0),
}


@pytest.mark.parametrize("name", list(LOCAL_CONSTRAINTS))
@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: f"{w.model}-{w.method}")
def test_local_options_after_another_amount_are_the_cold_ones(
    w: Workload, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local build's sizes (units, sharding, what ``settle`` chose) are kept across amounts of
    training (``candidates.local_sizes``): the options and rejections for an amount are the same
    whether computed cold or right after another amount, and the second walks no build's sizes,
    searches no headroom and moves no estimate again."""
    from optimizer.candidates import amounts, fitting, local_sizes
    from optimizer.candidates.amounts import MovingMemo
    from optimizer.candidates.local import local_candidates
    from tests.unit.plan_workloads import bundled

    builds = bundled()[1]
    c = LOCAL_CONSTRAINTS[name]

    def local(wl: Workload) -> tuple[list[Any], dict[str, int], list[Any]]:
        tally, memo = RejectionTally(), MovingMemo(wl)
        got = local_candidates(wl, c, builds, runs=2, estimator=default_estimator(), shardings=default_shardings(),
                               assumptions=CostAssumptions(), tally=tally, memo=memo)
        return got, dict(tally.counts), sorted(memo)

    again_calls: list[str] = []

    def counted(label: str, real: Any) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            again_calls.append(label)
            return real(*args, **kw)

        return call

    changed = 0
    for factor in (0.6, 45.0):
        other = _scaled(w, factor)
        clear_cache()
        cold = local(other)
        clear_cache()
        before = local(w)
        with monkeypatch.context() as m:
            for mod, attr in ((fitting, "safer"), (local_sizes, "sizes"), (amounts, "moved_to_amount")):
                m.setattr(mod, attr, counted(attr, getattr(mod, attr)))
            again_calls.clear()
            again = local(other)
        assert again == cold
        assert not again_calls
        changed += [x.hours for x in again[0]] != [x.hours for x in before[0]]
    clear_cache()
    # The grid compares moved hours wherever a build takes the job at all.
    assert changed == 2 or not cold[0]


def test_local_sizes_whose_figures_the_move_does_not_reproduce_are_not_moved() -> None:
    """Kept sizes whose hours are not what their estimate's basis gives (as if the estimator and the
    move had drifted apart) are refused, and the options are made anew: still the cold ones."""
    from optimizer.candidates import local_sizes
    from optimizer.candidates.amounts import MovingMemo
    from optimizer.candidates.local import local_candidates
    from tests.unit.plan_workloads import bundled

    builds = bundled()[1]
    w = Workload(model="qwen2.5-0.5b", method="lora", tokens=2e7)
    other = _scaled(w, 3.0)
    kw = {"max_gpus": MAX_TOTAL_GPUS, "max_units": CostAssumptions().max_local_units, "margin": None,
          "estimator": default_estimator(), "shardings": default_shardings()}
    clear_cache()
    made = local_sizes.sizes(w, "RTX4090", 1, memo={}, **kw)
    live = next(i for i, s in enumerate(made) if s.est is not None)
    assert local_sizes.KeptSizes(made, {}, w).at(other) is not None
    off = list(made)
    est = made[live].est
    assert est is not None
    off[live] = dataclasses.replace(made[live], est=est.model_copy(update={"hours": est.hours * 1.001}))
    assert local_sizes.KeptSizes(off, {}, w).at(other) is None

    def options(wl: Workload) -> list[Any]:
        return local_candidates(wl, Constraints(), builds, runs=1, estimator=default_estimator(),
                                shardings=default_shardings(), assumptions=CostAssumptions(), tally=RejectionTally(),
                                memo=MovingMemo(wl))

    clear_cache()
    cold = options(other)
    clear_cache()
    options(w)
    for key in list(local_sizes._SIZES._data):  # every kept entry as if its move had drifted
        entry = local_sizes._SIZES._data[key]
        local_sizes._SIZES._data[key] = local_sizes.KeptSizes(
            [dataclasses.replace(s, est=s.est.model_copy(update={"hours": s.est.hours * 1.001}))
             if s.est is not None else s for s in entry.sizes], dict(entry.read), entry.kept)
    assert options(other) == cold
    clear_cache()
