"""Properties of the memory estimate over random workloads (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.memory import memory_parts
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload

MODELS = ["bert-base", "gpt2", "qwen2.5-0.5b", "llama-3.2-1b", "llama-2-7b", "llama-3-8b", "t5-base", "phi-2"]

workloads = st.builds(
    lambda model, method, precision, optimizer, mb, seq, ckpt, rank, flash: Workload(
        model=model, method=method, precision=precision, optimizer=optimizer, micro_batch_size=mb,
        seq_len=seq, gradient_checkpointing=ckpt, lora_rank=rank, flash_attention=flash,
    ),
    st.sampled_from(MODELS),
    st.sampled_from(["full", "lora", "qlora"]),
    st.sampled_from(["fp32", "fp16", "bf16", "bf16-true"]),
    st.sampled_from(["adamw", "adamw_8bit", "sgd"]),
    st.integers(1, 64),
    st.integers(16, 8192),
    st.booleans(),
    st.sampled_from([4, 8, 16, 64, 256]),
    st.booleans(),
)
gpus = st.sampled_from(["V100", "A100", "RTX4090", "H100"])
counts = st.sampled_from([1, 2, 8, 16])


def _total(w: Workload, gpu: str = "A100", n: int = 1, sharding: str = "ddp") -> float:
    return memory_parts(resolve_model(w.model), w, gpu_spec(gpu), n, sharding).total


@settings(max_examples=150, deadline=None)
@given(workloads, gpus, st.integers(1, 16))
def test_memory_grows_with_batch(w: Workload, gpu: str, extra: int) -> None:
    bigger = w.model_copy(update={"micro_batch_size": w.micro_batch_size + extra})
    assert _total(bigger, gpu) >= _total(w, gpu)


@settings(max_examples=150, deadline=None)
@given(workloads, gpus, st.integers(1, 4096))
def test_memory_grows_with_sequence(w: Workload, gpu: str, extra: int) -> None:
    longer = w.model_copy(update={"seq_len": w.seq_len + extra})
    assert _total(longer, gpu) >= _total(w, gpu)


@settings(max_examples=100, deadline=None)
@given(workloads)
def test_memory_grows_with_rank(w: Workload) -> None:
    higher = w.model_copy(update={"lora_rank": w.lora_rank * 2})
    assert _total(higher) >= _total(w)


@settings(max_examples=150, deadline=None)
@given(workloads, gpus)
def test_checkpointing_lowers_memory(w: Workload, gpu: str) -> None:
    on = w.model_copy(update={"gradient_checkpointing": True})
    off = w.model_copy(update={"gradient_checkpointing": False})
    assert _total(on, gpu) <= _total(off, gpu)


@settings(max_examples=150, deadline=None)
@given(workloads, st.sampled_from([2, 4, 8, 64]))
def test_higher_zero_stage_lowers_memory(w: Workload, n: int) -> None:
    totals = [_total(w, "A100", n, s) for s in ("ddp", "zero1", "zero2", "zero3")]
    # DDP on one GPU is torch AMP (fp32 params); sharded stages use 16-bit params + fp32 master.
    assert totals[1] >= totals[2] >= totals[3]
    assert _total(w, "A100", n, "fsdp") == totals[3]
    if w.precision in ("fp32", "bf16-true") or w.method != "full":
        assert totals[0] >= totals[1]


@settings(max_examples=150, deadline=None)
@given(workloads, gpus, counts)
def test_lora_not_above_full_and_qlora_weights_not_above_lora(w: Workload, gpu: str, n: int) -> None:
    sharding = "zero3" if n > 1 else "ddp"
    shape = resolve_model(w.model)
    parts = {
        m: memory_parts(shape, w.model_copy(update={"method": m}), gpu_spec(gpu), n, sharding)
        for m in ("full", "lora", "qlora")
    }
    assert parts["lora"].total <= parts["full"].total
    assert parts["qlora"].weights <= parts["lora"].weights


@settings(max_examples=100, deadline=None)
@given(workloads, gpus)
def test_parts_are_non_negative(w: Workload, gpu: str) -> None:
    mem = memory_parts(resolve_model(w.model), w, gpu_spec(gpu), 1, "ddp")
    assert min(mem.weights, mem.gradients, mem.optimizer, mem.activations, mem.logits, mem.temporary) >= 0
