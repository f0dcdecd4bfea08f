"""Issue 18 terms that explain the worst left-out rows: auto-gptq's unpacking (``quantization:
"gptq"``) and cuDNN's Winograd count for fp32 3x3 convolutions on CUDA cores; the plan's cost
floors follow both."""

from __future__ import annotations

import pytest

from optimizer.candidates.bounds import ROUNDING_SLACK_HOURS, single_gpu_hours_floor
from optimizer.estimator import calibration as cal
from optimizer.estimator import vision
from optimizer.estimator.estimate import estimate
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.throughput import conv_work_share, dequant_bytes
from optimizer.estimator.workload import Workload

RESNET50 = dict(model="resnet50", method="full", optimizer="sgd", gradient_checkpointing=False,
                gradient_accumulation_steps=1, sharding="ddp", samples=1_281_167)


def test_resnet50_winograd_share_is_its_stride_one_3x3_convolutions() -> None:
    fig = vision.resnet_figures((3, 4, 6, 3), 224)
    # 16 bottlenecks, one 3x3 each; the three that open stages 2-4 have stride 2 (v1.5).
    share = fig.winograd_flops / fig.forward_flops
    assert 0.33 < share < 0.40, share


@pytest.mark.parametrize(("gpu", "precision", "winograd"), [
    ("V100", "fp32", True), ("T4", "fp32", True), ("V100", "fp16", False), ("A100", "tf32", False),
    ("A100", "fp32", False),  # cuDNN allows TF32 for fp32 convolutions on Ampere: tensor cores
])
def test_winograd_only_for_cuda_core_convolutions(gpu: str, precision: str, winograd: bool) -> None:
    w = Workload.model_validate({**RESNET50, "precision": precision, "micro_batch_size": 64})
    share = conv_work_share(resolve_model("resnet50"), w, gpu_spec(gpu))
    fig = vision.resnet_figures((3, 4, 6, 3), 224)
    expected = 1.0 - fig.winograd_flops / fig.forward_flops * (1.0 - 1.0 / cal.WINOGRAD_MULTIPLY_SAVING.value)
    assert share == (pytest.approx(expected) if winograd else 1.0)


def test_fp32_resnet50_on_v100_near_published() -> None:
    """NVIDIA DeepLearningExamples ResNet-50 v1.5 README (commit 291f0d02): FP32 on one V100 16GB,
    batch 112, 367 img/s (tests/data/measurements_extra.jsonl V004)."""
    w = Workload.model_validate({**RESNET50, "precision": "fp32", "micro_batch_size": 112})
    got = estimate(w, "V100", 1).samples_per_second
    assert got == pytest.approx(367.0, rel=0.12)


def test_gptq_dequant_bytes_follow_the_counted_chain() -> None:
    shape = resolve_model("llama-3-8b")
    base = dict(model="llama-3-8b", method="qlora", micro_batch_size=1, seq_len=512, tokens=1e8)
    gptq = Workload.model_validate({**base, "quantization": "gptq", "gradient_checkpointing": True})
    per = 2 * cal.GPTQ_FORWARD_DEQUANT_BYTES_PER_PARAM.value + cal.GPTQ_BACKWARD_BYTES_PER_PARAM.value
    assert dequant_bytes(shape, gptq) == pytest.approx(shape.linear_layer_params * per)
    no_ckpt = gptq.model_copy(update={"gradient_checkpointing": False})
    assert dequant_bytes(shape, no_ckpt) < dequant_bytes(shape, gptq)
    assert dequant_bytes(shape, Workload.model_validate({**base, "method": "lora"})) == 0.0


@pytest.mark.parametrize("w", [
    Workload(model="llama-3-8b", method="qlora", quantization="gptq", tokens=2e8, seq_len=512),
    Workload(model="resnet50", method="full", samples=5e6, precision="fp32"),
], ids=["gptq-qlora", "resnet50-fp32"])
def test_cost_floor_stays_below_the_new_terms(w: Workload) -> None:
    for gpu in ("T4", "V100", "A100-80GB"):
        floor = single_gpu_hours_floor(w, gpu)
        for n in (1, 8):
            est = estimate(w, gpu, n)
            r = est.recipe
            if r is not None and r.global_batch_size != r.requested_global_batch_size:
                continue
            gpu_hours = n * (est.hours - est.details["hours_parts"]["setup_hours"])
            assert gpu_hours >= floor - ROUNDING_SLACK_HOURS * n, (gpu, n, gpu_hours, floor)
