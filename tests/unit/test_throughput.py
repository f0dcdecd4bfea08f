"""FLOPs, tokens per second, MFU and hours."""

from __future__ import annotations

import pytest

from optimizer.estimator.estimate import estimate
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.throughput import (
    effective_peak_tflops,
    forward_flops_per_token,
    train_flops,
    training_flops_per_token,
)
from optimizer.estimator.workload import Workload


def _w(**kw: object) -> Workload:
    base: dict[str, object] = {"model": "llama-3-8b", "micro_batch_size": 4, "seq_len": 2048, "tokens": 1e8}
    base.update(kw)
    return Workload.model_validate(base)


def test_full_training_is_about_6ND() -> None:
    shape = resolve_model("llama-3-8b")
    w = _w(seq_len=128)
    # At short sequences the attention term is small: 6 * N * D with N counted without the input
    # embedding (a lookup; the 128k x 4096 table is 6.5% of Llama-3-8B), the LM head included.
    assert train_flops(shape, w) == pytest.approx(6 * (shape.params - shape.embedding_params) * 1e8, rel=0.02)
    assert train_flops(shape, w) == pytest.approx(6 * shape.params * 1e8, rel=0.08)


def test_attention_flops_grow_with_sequence() -> None:
    shape = resolve_model("llama-3-8b")
    short, long = forward_flops_per_token(shape, 512), forward_flops_per_token(shape, 8192)
    assert long - short == pytest.approx(4 * shape.layers * (8192 - 512) * shape.q_dim)


def test_lora_skips_weight_gradients_and_checkpointing_adds_a_forward() -> None:
    shape = resolve_model("llama-3-8b")
    fwd = forward_flops_per_token(shape, 2048)
    assert training_flops_per_token(shape, _w(method="full")) == (3 * fwd, 3 * fwd)
    assert training_flops_per_token(shape, _w(method="lora")) == (2 * fwd, 2 * fwd)
    model, hardware = training_flops_per_token(shape, _w(method="qlora", gradient_checkpointing=True))
    assert (model, hardware) == (2 * fwd, 3 * fwd)


def test_fp32_uses_tf32_on_ampere_only() -> None:
    assert effective_peak_tflops(gpu_spec("A100"), "fp32") == 156
    assert effective_peak_tflops(gpu_spec("V100"), "fp32") == gpu_spec("V100").fp32_tflops
    assert effective_peak_tflops(gpu_spec("H100"), "bf16") == 989


def test_faster_cards_are_faster() -> None:
    w = _w(method="lora", gradient_checkpointing=True)
    tps = {g: estimate(w, g).tokens_per_second for g in ("T4", "A10G", "A100", "H100")}
    assert tps["T4"] < tps["A10G"] < tps["A100"] < tps["H100"]


def test_mfu_in_physical_range() -> None:
    for gpu in ("RTX3060", "RTX4090", "A100-80GB", "H100", "L4"):
        est = estimate(_w(method="qlora", gradient_checkpointing=True), gpu)
        assert 0.05 < est.mfu < 0.8, (gpu, est.mfu)


def test_scaling_over_gpus_is_sublinear_and_close_on_nvlink() -> None:
    w = _w(model="llama-3.2-1b", method="full", precision="bf16")
    one = estimate(w, "A100-80GB", 1, "ddp").tokens_per_second
    eight = estimate(w, "A100-80GB", 8, "ddp").tokens_per_second
    assert 6.5 * one < eight <= 8 * one
    pcie = estimate(w, "RTX4090", 8, "ddp").tokens_per_second / estimate(w, "RTX4090", 1, "ddp").tokens_per_second
    assert pcie < eight / one  # PCIe all-reduce hides less than NVLink


def test_hours_are_training_plus_overhead() -> None:
    est = estimate(_w(method="qlora"), "A100-80GB")
    parts = est.details["hours_parts"]
    assert parts["train_hours"] == pytest.approx(1e8 / est.tokens_per_second / 3600, rel=1e-3)
    assert est.hours == pytest.approx(sum(parts.values()), rel=1e-3)
    assert parts["setup_hours"] > 0 and parts["download_hours"] > 0


def test_more_tokens_take_longer() -> None:
    assert estimate(_w(tokens=2e8), "A100").hours > estimate(_w(tokens=1e8), "A100").hours
