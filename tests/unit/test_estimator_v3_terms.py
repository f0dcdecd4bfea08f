"""Issue 18 terms that explain the worst left-out rows: auto-gptq's unpacking (``quantization:
"gptq"``), cuDNN's Winograd count for fp32 3x3 convolutions on CUDA cores and its layout
transposes around tensor-core convolutions on NCHW maps (``memory_format: "nchw"``); the plan's
cost floors follow all three."""

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


# --- NCHW layout transposes (``workload.memory_format``) ------------------------------------


def test_resnet50_conv_io_elements_count_every_convolution() -> None:
    fig = vision.resnet_figures((3, 4, 6, 3), 224)
    # Stem: 3x224x224 in, 64x112x112 out; the rest is the 52 bottleneck/projection convolutions.
    stem = 3 * 224 * 224 + 64 * 112 * 112
    assert stem < fig.conv_io_elements
    assert fig.conv_io_elements == pytest.approx(21_776_384)
    assert vision.resnet_figures((3, 4, 6, 3), 160).conv_io_elements < fig.conv_io_elements


@pytest.mark.parametrize(("gpu", "precision", "bytes_per_element"), [
    ("A100-80GB", "fp16", 2.0), ("A100-80GB", "tf32", 4.0), ("A100-80GB", "fp32", 4.0),  # TF32 convs
    ("V100", "fp16", 2.0), ("H100", "bf16", 2.0), ("RTX4090", "auto", 2.0),
    ("V100", "fp32", 0.0), ("T4", "fp32", 0.0), ("V100", "bf16", 0.0),  # CUDA-core convolutions: NCHW natively
])
def test_nchw_transposes_only_around_tensor_core_convolutions(
    gpu: str, precision: str, bytes_per_element: float
) -> None:
    from optimizer.estimator.throughput import nchw_transpose_bytes

    shape = resolve_model("resnet50")
    w = Workload.model_validate({**RESNET50, "precision": precision, "micro_batch_size": 64, "memory_format": "nchw"})
    io = vision.resnet_figures((3, 4, 6, 3), 224).conv_io_elements
    expected = 64 * io * cal.NCHW_TRANSPOSES_PER_CONV.value * bytes_per_element
    assert nchw_transpose_bytes(shape, w, gpu_spec(gpu)) == pytest.approx(expected)
    # Channels-last maps and models without convolutions pay none.
    assert nchw_transpose_bytes(shape, w.model_copy(update={"memory_format": "channels_last"}), gpu_spec(gpu)) == 0.0
    vit = Workload.model_validate({**RESNET50, "model": "vit-b-16", "precision": precision, "micro_batch_size": 64,
                                   "memory_format": "nchw"})
    assert nchw_transpose_bytes(resolve_model("vit-b-16"), vit, gpu_spec(gpu)) == 0.0


def test_amp_nchw_resnet50_on_a100_is_slower_and_near_lambdas_run() -> None:
    # lambdal/deeplearning-benchmark A100_80GB_SXM4_v1 AMP log: batch 1280, NCHW, synthetic data,
    # 1582 img/s; DeepLearningExamples' channels-last AMP row: 2470 img/s at batch 256.
    w = Workload.model_validate({**RESNET50, "precision": "fp16", "micro_batch_size": 1280, "memory_format": "nchw"})
    nchw = estimate(w, "A100-80GB").samples_per_second
    nhwc = estimate(w.model_copy(update={"memory_format": "channels_last"}), "A100-80GB").samples_per_second
    assert nhwc > 1.25 * nchw, (nhwc, nchw)
    assert abs(nchw - 1582) / 1582 <= 0.25, nchw


@pytest.mark.parametrize("precision", ["fp16", "tf32", "auto"])
def test_plan_floor_stays_below_nchw_estimates(precision: str) -> None:
    w = Workload(model="resnet50", method="full", dataset_samples=1_281_167, epochs=1, precision=precision,
                 memory_format="nchw")
    for gpu in ("V100", "A100-80GB", "H100", "RTX4090"):
        floor = single_gpu_hours_floor(w, gpu)
        est = estimate(w, gpu, 1)
        train_h = est.hours - est.details["hours_parts"]["setup_hours"]
        assert floor > 0 and train_h >= floor - ROUNDING_SLACK_HOURS, (gpu, train_h, floor)
        # The floor follows the transposes: it rises with them (TF32 asked on a V100 runs fp32 on
        # CUDA cores, which take NCHW natively: no transposes, the same floor).
        nhwc_floor = single_gpu_hours_floor(w.model_copy(update={"memory_format": "channels_last"}), gpu)
        if gpu == "V100" and precision == "tf32":
            assert floor == pytest.approx(nhwc_floor)
        else:
            assert floor > nhwc_floor, (gpu, floor, nhwc_floor)


# --- the loss kernel (``workload.cross_entropy``) --------------------------------------------


@pytest.mark.parametrize(("stack", "auto_bytes"), [("hf", 2.0 + 4.0 * 3.0), ("compiled", 6.0), ("fused", 0.0),
                                                   ("litgpt", 6.0)])
def test_cross_entropy_logits_bytes_per_stack(stack: str, auto_bytes: float) -> None:
    from optimizer.estimator.stacks import loss_logits_bytes, stack_profile

    prof = stack_profile(stack)
    buffers = cal.LOGITS_FP32_BUFFERS.value
    assert loss_logits_bytes(prof, "auto", 2.0, buffers) == auto_bytes
    assert loss_logits_bytes(prof, "eager", 2.0, buffers) == 2.0 + 4.0 * buffers  # transformers' rule anywhere
    # flash-attn's fused loss: 16-bit logits and their 16-bit gradient; a fused linear loss keeps less.
    assert loss_logits_bytes(prof, "fused", 2.0, buffers) == min(4.0, auto_bytes)


def test_fused_cross_entropy_lowers_memory_and_traffic_of_a_small_vocab_heavy_model() -> None:
    # MPT-125m as llm-foundry benchmarks it (8 x A100-40GB, FSDP, micro-batch 26 x 2048 tokens):
    # published 1,090,678 tokens/s (scripts/train/benchmarking/README.md, commit 061f2c7c, row M115).
    mpt = dict(model={"params_b": 0.1253, "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
                      "intermediate": 3072, "vocab": 50368}, method="full", precision="bf16", micro_batch_size=26,
               seq_len=2048, gradient_checkpointing=False, sharding="zero3", gradient_accumulation_steps=1,
               tokens=1e8)
    eager = estimate(Workload(**mpt), "A100", 8, "zero3")
    fused = estimate(Workload(**mpt, cross_entropy="fused"), "A100", 8, "zero3")
    assert fused.memory_gb.total_per_gpu < eager.memory_gb.total_per_gpu
    assert fused.tokens_per_second > 1.3 * eager.tokens_per_second
    assert abs(fused.tokens_per_second - 1_090_678) / 1_090_678 <= 0.15, fused.tokens_per_second
    # A model without an LM head (ResNet) is untouched.
    r = Workload.model_validate({**RESNET50, "micro_batch_size": 64})
    assert estimate(r, "A100").samples_per_second == estimate(r.model_copy(update={"cross_entropy": "fused"}),
                                                              "A100").samples_per_second
