"""``precision: "auto"`` (CONTRACT v3): bf16 on cards with bf16 tensor cores, fp16 on Volta/Turing,
chosen per option like the micro-batch; an explicit precision is kept."""

from __future__ import annotations

import pytest

from optimizer.estimator.estimate import estimate
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.precision import auto_precision, with_precision
from optimizer.estimator.workload import Workload


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [("T4", "fp16"), ("V100", "fp16"), ("V100-32GB", "fp16"), ("RTX6000", "fp16"),
     ("A100", "bf16"), ("RTX4090", "bf16"), ("H100", "bf16"), ("MI300X", "bf16")],
)
def test_auto_means_the_cards_mixed_precision(gpu: str, expected: str) -> None:
    assert auto_precision(gpu_spec(gpu)) == expected


def test_bert_base_on_a_t4_at_defaults_runs_fp16() -> None:
    w = Workload(model="bert-base", tokens=1e8)
    assert w.precision == "auto"
    e = estimate(w, "T4")
    assert e.recipe is not None and e.recipe.precision == "fp16" and "precision" in e.recipe.chosen
    # Priced as fp16 on the tensor cores, not bf16 emulated at the fp32 rate.
    assert not any("emulated" in x for x in e.warnings)
    bf16 = estimate(w.model_copy(update={"precision": "bf16"}), "T4")
    fp16 = estimate(w.model_copy(update={"precision": "fp16"}), "T4")
    assert any("emulated" in x for x in bf16.warnings)
    assert e.tokens_per_second == pytest.approx(fp16.tokens_per_second, rel=1e-6)
    assert e.tokens_per_second > 2 * bf16.tokens_per_second


def test_explicit_precision_is_kept() -> None:
    w = Workload(model="bert-base", precision="bf16", tokens=1e8)
    e = estimate(w, "T4")
    assert e.recipe is not None and e.recipe.precision == "bf16" and "precision" not in e.recipe.chosen
    assert with_precision(w, gpu_spec("T4")) is w


def test_auto_is_chosen_per_option() -> None:
    w = Workload(model="qwen2.5-0.5b", tokens=1e8)
    a100, v100 = estimate(w, "A100-80GB"), estimate(w, "V100")
    assert a100.recipe is not None and v100.recipe is not None
    assert (a100.recipe.precision, v100.recipe.precision) == ("bf16", "fp16")
    # Same answer as asking for the resolved precision outright.
    same = estimate(w.model_copy(update={"precision": "bf16"}), "A100-80GB")
    assert a100.tokens_per_second == same.tokens_per_second
    assert a100.memory_gb.total_per_gpu == same.memory_gb.total_per_gpu


def test_resolved_copies_are_shared() -> None:
    w = Workload(model="gpt2")
    assert with_precision(w, gpu_spec("T4")) is with_precision(w, gpu_spec("V100"))
    assert with_precision(w, gpu_spec("T4")).precision == "fp16"
