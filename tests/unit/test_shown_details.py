"""The detail figures only a reader of an estimate sees (the step's seconds by part, FLOPs per token,
the card's peak, ...) are made when the estimate is shown (``estimate.ShownDetails``), not for each
of a quote's ~130 estimates; shown, the details are what the estimator wrote before, in its order."""

from __future__ import annotations

import json

import pytest

from optimizer.estimator.amounts import BASIS_KEY
from optimizer.estimator.estimate import DETAIL_ORDER, GIB_PER_GB, ShownDetails, clear_cache, estimate
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.workload import Workload
from optimizer.results import SHOWN_KEY

SHOWN_ONLY = ("physical_vram_gb", "range_widths", "model_flops_per_token", "hardware_flops_per_token",
              "peak_tflops_per_gpu", "matmul_efficiency", "step_seconds", "sharding_tried")


@pytest.mark.parametrize(("model", "method", "gpu", "count"), [
    ("qwen2.5-0.5b", "lora", "A100", 1), ("llama-3-8b", "qlora", "RTX4090", 2), ("gpt2", "full", "H100", 8),
])
def test_shown_figures_are_made_when_shown_in_the_estimators_order(model: str, method: str, gpu: str,
                                                                   count: int) -> None:
    est = estimate(Workload(model=model, method=method, tokens=1e8), gpu, count, "auto")
    assert not set(SHOWN_ONLY) & est.details.keys()
    assert isinstance(est.details[SHOWN_KEY], ShownDetails)

    shown = est.model_dump()["details"]
    assert list(shown) == list(DETAIL_ORDER)  # every figure, in the order the estimator wrote them
    assert json.loads(est.model_dump_json())["details"] == shown
    tp = est.details[BASIS_KEY].tp  # the throughput the estimate was computed with
    assert shown["step_seconds"] == {
        "compute": round(tp.compute_seconds, 4), "memory_bound": round(tp.memory_seconds, 4),
        "launch": round(tp.dispatch_seconds, 4), "per_step_overhead": round(tp.step_overhead_seconds, 4),
        "offload": round(tp.offload_seconds, 4), "communication": round(tp.comm_seconds, 4),
        "total": round(tp.step_seconds, 4),
    }
    assert shown["model_flops_per_token"] == round(tp.model_flops_per_token, 4)
    assert shown["physical_vram_gb"] == round(gpu_spec(est.gpu).vram_gb * GIB_PER_GB, 4)
    assert shown["sharding_tried"] == [est.sharding]

    # In Python, all_details holds the same figures unrounded, and the estimator's own basis.
    full = est.all_details
    assert [k for k in full if not k.startswith("_")] == list(DETAIL_ORDER)
    assert full["step_seconds"]["total"] == tp.step_seconds
    assert full[BASIS_KEY] is est.details[BASIS_KEY] and SHOWN_KEY not in full


def test_keys_a_details_dict_holds_itself_win_and_its_own_keys_follow() -> None:
    est = estimate(Workload(model="gpt2", method="full", tokens=1e7), "A100", 1)
    mine = {"train_hours": 1.0}
    details = {**est.details, "hours_parts": mine, "measurement": {"id": "m1"}}  # as optimizer.measured writes
    merged = details[SHOWN_KEY].merged(details)
    assert merged["hours_parts"] is mine
    assert list(merged)[-2:] == [BASIS_KEY, "measurement"]
    assert "step_seconds" in merged and SHOWN_KEY not in merged


def test_estimates_compare_by_what_they_show() -> None:
    w = Workload(model="qwen2.5-0.5b", method="lora", tokens=1e8)
    clear_cache()
    first = estimate(w, "A100", 1)
    clear_cache()
    again = estimate(w, "A100", 1)
    assert first.details[SHOWN_KEY] is not again.details[SHOWN_KEY]
    assert first == again  # computed twice: equal, as when the figures were made eagerly

    other = estimate(w, "H100", 1)
    assert first.details[SHOWN_KEY] != other.details[SHOWN_KEY]  # another card's peak and step
