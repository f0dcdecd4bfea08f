"""The amount of training is not part of the estimator's memo keys: an estimate or a quote for
tokens T computed cold is the same, figure for figure, as one computed right after the same
question with tokens T' (``optimizer.estimator.amounts``), and the second question computes no
new memory model, recipe search or throughput model."""

from __future__ import annotations

from typing import Any

import pytest

from optimizer.errors import InvalidInput
from optimizer.estimator import estimate as est_mod
from optimizer.estimator.amounts import BASIS_KEY
from optimizer.estimator.estimate import clear_cache, estimate
from optimizer.estimator.workload import Constraints, Workload
from optimizer.quote import quote
from tests.unit.plan_workloads import WORKLOADS, bundled, served_offers

AMOUNTS = ("tokens", "samples", "dataset_tokens", "dataset_samples")


def _scaled(w: Workload, factor: float) -> Workload:
    """``w`` with its amount of training (whichever field gives it) times ``factor``."""
    name = next(n for n in AMOUNTS if getattr(w, n) is not None)
    return w.model_copy(update={name: getattr(w, name) * factor})


def _cold_and_after(w: Workload, other: Workload, run: Any) -> tuple[Any, Any]:
    clear_cache()
    cold = run(w)
    clear_cache()
    run(other)
    return cold, run(w)


# Tokens from small to past the 64 GB dataset-cache cap (host RAM) and across one-hour runs
# (checkpoint count): the figures that are not plain multiples of the amount.
@pytest.mark.parametrize("factor", [0.01, 37.0, 400.0])
@pytest.mark.parametrize(("gpu", "count"), [("A100", 1), ("RTX4090", 2), ("H100", 8), ("T4", 1)])
def test_an_estimate_after_another_amount_is_the_estimate_computed_cold(gpu: str, count: int, factor: float) -> None:
    for w in WORKLOADS:
        other = _scaled(w, factor)
        cold, after = _cold_and_after(w, other, lambda x: estimate(x, gpu, count))  # noqa: B023
        assert after.model_dump() == cold.model_dump(), (w, gpu, count)
        assert after.details[BASIS_KEY].w.tokens == w.tokens  # the basis moved with the amount


@pytest.mark.python_only  # patches or subclasses what compiled code calls directly
def test_a_new_amount_computes_no_new_memory_or_speed_model(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    w = Workload(model="llama-3-8b", method="qlora", tokens=1e8)
    first = estimate(w, "A100", 1)
    kept = (len(est_mod._FITTED), len(est_mod._PARTS))
    models: list[str] = []
    for name in ("memory_parts", "throughput"):
        made = getattr(est_mod, name)
        monkeypatch.setattr(est_mod, name, lambda *a, _made=made, _name=name, **k: models.append(_name) or _made(*a, **k))
    more = estimate(w.model_copy(update={"tokens": 3e9}), "A100", 1)
    assert (len(est_mod._FITTED), len(est_mod._PARTS)) == kept
    assert models == []  # neither a memory model nor a throughput computed
    estimate(w.model_copy(update={"seq_len": 1024}), "A100", 1)
    assert "memory_parts" in models and "throughput" in models  # the count above can see them
    # Hours grow with the tokens; memory, speed and the recipe stay.
    assert more.hours > 20 * first.hours
    assert (more.memory_gb, more.tokens_per_second, more.recipe) == (first.memory_gb, first.tokens_per_second,
                                                                    first.recipe)
    assert more.details["hours_parts"]["train_hours"] == pytest.approx(
        30 * first.details["hours_parts"]["train_hours"], rel=1e-12)


def test_the_basis_is_not_part_of_the_serialised_estimate() -> None:
    clear_cache()
    e = estimate(Workload(model="gpt2", tokens=1e7), "A10G", 1)
    assert BASIS_KEY in e.details
    assert BASIS_KEY not in e.model_dump()["details"]
    assert BASIS_KEY not in e.model_dump_json()


def test_an_image_model_still_refuses_tokens_when_its_samples_were_estimated_first() -> None:
    clear_cache()
    estimate(Workload(model="resnet50", samples=1e6), "A100", 1)
    with pytest.raises(InvalidInput) as err:
        estimate(Workload(model="resnet50", tokens=1e6), "A100", 1)
    assert err.value.field == "workload.tokens"


def _quote(w: Workload, c: Constraints) -> dict[str, Any]:
    offers, builds = bundled()
    q = quote(w, c, served_offers(c), builds, prices_as_of={}, snapshot_id="t", runs=3)
    return q.model_dump(exclude={"solver": {"seconds"}})


@pytest.mark.parametrize("constraints", [Constraints(), Constraints(allow_spot=True, deadline_hours=30.0)])
def test_a_quote_for_tokens_t_is_the_same_cold_or_after_a_quote_for_other_tokens(constraints: Constraints) -> None:
    w = Workload(model="qwen2.5-1.5b", method="lora", tokens=3e8)
    for other in (w.model_copy(update={"tokens": 4.1e9}), w.model_copy(update={"tokens": 2e7})):
        cold, after = _cold_and_after(w, other, lambda x: _quote(x, constraints))  # noqa: B023
        assert after == cold
        assert cold["best"] is not None and cold["best"]["hours"] > 0


def test_the_rate_key_leaves_out_only_the_amount_of_training() -> None:
    w = Workload(model="llama-3-8b", method="qlora", tokens=1e8)
    assert w.model_copy(update={"tokens": 5e9}).rate_key() == w.rate_key()
    assert Workload(model="llama-3-8b", method="qlora", dataset_tokens=1e8, epochs=2).rate_key() == w.rate_key()
    assert w.model_copy(update={"tokens": 5e9}).cache_key() != w.cache_key()
    for change in ({"seq_len": 1024}, {"method": "lora"}, {"model": "qwen2.5-7b"}, {"global_batch_size": 32}):
        assert w.model_copy(update=change).rate_key() != w.rate_key(), change


def test_a_large_full_fine_tune_after_other_tokens_is_the_cold_quote() -> None:
    # Most of its configurations are rejected (VRAM): they keep their reason, the rest move.
    w = Workload(model="llama-3-8b", method="full", tokens=2e8, seq_len=1024)
    cold, after = _cold_and_after(w, w.model_copy(update={"tokens": 6e9}), lambda x: _quote(x, Constraints()))
    assert after == cold
    assert cold["rejected"] and cold["best"] is not None
