"""``gpucost probe``: build the workload's model with random weights on one device and time real
training steps.

Warm-up runs until the step time settles (``record.settled``: at least 2 steps, then the last 3
within 5 % coefficient of variation) or until ``max_warmup`` steps; then ``steps`` timed steps,
each timed with CUDA events on a GPU (the GPU's own clock, no host gap counted) or
``time.perf_counter`` on the CPU. Peak memory is the allocator's (reserved and allocated), reset
after the model is built. Running out of memory is an answer too: a record with ``fits`` false.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optimizer.errors import InvalidInput
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload
from optimizer.measurement import CPU, Measurement
from service.probe.model import (
    build_model,
    hf_config_dict,
    importable,
    is_oom,
    make_optimizer,
    max_trainable_seq,
    train_step,
)
from service.probe.record import (
    build_measurement,
    gpu_from_device_name,
    nvml_info,
    oom_measurement,
    settled,
)

INSTALL_HINT = "pip install 'gpucost[probe]' (torch, transformers, peft, bitsandbytes)"
MAX_STEPS = 10_000
DEFAULT_STEPS = 20
DEFAULT_MAX_WARMUP = 20
# Without a micro-batch given, the CPU probe runs the smallest recipe (the estimator has no CPU
# model to pick one from).
CPU_DEFAULT_MICRO_BATCH = 1


class ProbeUnavailable(InvalidInput):
    """The probe cannot run here (libraries missing, no such device): exit 2 with what to do."""


@dataclass(frozen=True)
class Device:
    kind: str  # "cuda" or "cpu"
    index: int
    name: str  # torch's device name, or "cpu"
    gpu: str  # canonical gpucost name, or "cpu"


def require_libraries(workload: Workload) -> None:
    libs = importable()
    missing = [n for n in ("torch", "transformers") if n not in libs]
    if workload.method in ("lora", "qlora") and "peft" not in libs:
        missing.append("peft")
    if (workload.method == "qlora" or workload.optimizer == "adamw_8bit") and "bitsandbytes" not in libs:
        missing.append("bitsandbytes")
    if missing:
        raise ProbeUnavailable("probe", f"needs {', '.join(missing)}, which are not installed: {INSTALL_HINT}")


def pick_device(device: str | None, gpu_index: int | None, gpu: str | None) -> Device:
    """The device to probe: ``--device cpu``, or CUDA device ``--gpu-index`` (default 0)."""
    import torch

    if device == CPU:
        return Device("cpu", 0, CPU, CPU)
    if device not in (None, "cuda"):
        raise InvalidInput("--device", f"{device!r}: give cpu, or leave it out for a CUDA GPU")
    if not torch.cuda.is_available():
        raise ProbeUnavailable("--device", f"torch {torch.__version__} sees no CUDA device; "
                               "use --device cpu to probe on the CPU (tiny models)")
    index = gpu_index or 0
    if not 0 <= index < torch.cuda.device_count():
        raise InvalidInput("--gpu-index", f"{index}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    name = torch.cuda.get_device_name(index)
    canon = gpu or gpu_from_device_name(name)
    if canon is None:
        raise InvalidInput("--gpu", f"{name!r} is not a GPU gpucost knows; name it with --gpu")
    return Device("cuda", index, name, canon)


def concrete_recipe(workload: Workload, dev: Device) -> Workload:
    """``workload`` with the one recipe the probe runs: its explicit micro-batch and checkpointing,
    or for ``auto`` the ones the estimator picks for this GPU (on the CPU: micro-batch 1, no
    checkpointing)."""
    mb, ckpt = workload.micro_batch_size, workload.gradient_checkpointing
    if mb == "auto" or ckpt == "auto":
        if dev.gpu == CPU:
            fitted_mb, fitted_ckpt = CPU_DEFAULT_MICRO_BATCH, False
        else:
            from optimizer.estimator.estimate import estimate

            recipe = estimate(workload, dev.gpu, 1, None).recipe
            fitted_mb = recipe.micro_batch_size if recipe else 1
            fitted_ckpt = recipe.gradient_checkpointing if recipe else False
        mb = fitted_mb if mb == "auto" else mb
        ckpt = fitted_ckpt if ckpt == "auto" else ckpt
    precision = workload.precision
    if precision == "auto":  # the card's own choice (optimizer.estimator.precision); bf16 on the CPU
        from optimizer.estimator.gpus import gpu_spec
        from optimizer.estimator.precision import auto_precision

        precision = auto_precision(None if dev.gpu == CPU else gpu_spec(dev.gpu))
    return Workload.model_validate({**workload.model_dump(exclude_unset=True), "micro_batch_size": mb,
                                    "gradient_checkpointing": ckpt, "precision": precision})


def refusal(workload: Workload, dev: Device) -> InvalidInput | None:
    """Why the probe does not run this workload (naming the field), or None."""
    shape = resolve_model(workload.model)
    try:
        hf_config_dict(shape)
    except ValueError as exc:
        return InvalidInput("workload.model", str(exc))
    if workload.gradient_checkpointing == "offload":
        return InvalidInput("workload.gradient_checkpointing", "offloaded checkpointing is not built by the probe; "
                            "time your own training loop with the hooks (service.probe.hooks)")
    if workload.offload != "none":
        return InvalidInput("workload.offload", "the probe runs on one device without offload")
    if workload.stack == "fused":
        return InvalidInput("workload.stack", "fused stacks (Liger, Unsloth) are not built by the probe; time your own "
                            "training loop with the hooks (service.probe.hooks)")
    if workload.precision == "fp16" and dev.gpu == CPU:
        return InvalidInput("workload.precision", "fp16 mixed precision with a gradient scaler is a CUDA feature; "
                            "use bf16 or fp32 on the CPU")
    if workload.method == "qlora" and shape.name.lower().startswith("gpt2"):
        return InvalidInput("workload.method", "qlora: gpt2 uses Conv1D layers, which bitsandbytes does not quantize")
    limit = max_trainable_seq(shape)
    if limit is not None and workload.seq_len > limit:
        return InvalidInput("workload.seq_len", f"{workload.seq_len} exceeds {shape.name}'s {limit} learned positions")
    return None


class _Timer:
    """Times one step: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, dev: Device) -> None:
        import torch

        self.torch = torch
        self.cuda = dev.kind == "cuda"

    def time(self, step: Callable[[], None]) -> float:
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1000.0
        import time

        t0 = time.perf_counter()
        step()
        return time.perf_counter() - t0


def _step_fn(model: Any, workload: Workload, dev: Device, opt: Any) -> Callable[[], None]:
    import torch

    device = dev.kind if dev.kind == "cpu" else f"cuda:{dev.index}"
    gen = torch.Generator(device="cpu").manual_seed(0)
    mb = workload.micro_batch_size
    assert isinstance(mb, int)
    ids = torch.randint(0, model.config.vocab_size, (mb, workload.seq_len), generator=gen).to(device)
    if resolve_model(workload.model).arch == "encoder":
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                 "labels": torch.randint(0, 2, (mb,), generator=gen).to(device)}
    else:
        batch = {"input_ids": ids, "labels": ids}
    return train_step(model, batch, opt, workload.precision, dev.kind)


def probe(
    workload: Workload, *, device: str | None = None, gpu_index: int | None = None, gpu: str | None = None,
    steps: int = DEFAULT_STEPS, max_warmup: int = DEFAULT_MAX_WARMUP,
) -> Measurement:
    """Build, warm up, time ``steps`` steps; the checked Measurement (``fits`` false on OOM)."""
    if not 1 <= steps <= MAX_STEPS:
        raise InvalidInput("--steps", f"must be 1-{MAX_STEPS}")
    if not 0 <= max_warmup <= MAX_STEPS:
        raise InvalidInput("--warmup", f"must be 0-{MAX_STEPS}")
    require_libraries(workload)
    dev = pick_device(device, gpu_index, gpu)
    workload = concrete_recipe(workload, dev)
    refused = refusal(workload, dev)
    if refused is not None:
        raise refused
    import torch

    device_info: dict[str, Any] = {}
    if dev.kind == "cuda":
        torch.cuda.set_device(dev.index)
        device_info = nvml_info(dev.index)
    torch.manual_seed(0)
    shape = resolve_model(workload.model)
    model: Any = None
    built = None
    with warnings.catch_warnings():
        # transformers' own deprecation notices while it checkpoints: not the user's concern here.
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        try:
            model, built = build_model(
                shape, method=workload.method, precision=workload.precision,
                checkpointing=bool(workload.gradient_checkpointing),
                device=dev.kind if dev.kind == "cpu" else f"cuda:{dev.index}",
                lora_rank=workload.lora_rank, lora_targets=workload.lora_targets,
            )
            if workload.stack == "compiled":
                model = torch.compile(model)
            model.train()
            params = [p for p in model.parameters() if p.requires_grad]
            trainable = sum(p.numel() for p in params)
            opt = make_optimizer(workload.optimizer, params)
            step = _step_fn(model, workload, dev, opt)
            if dev.kind == "cuda":
                torch.cuda.synchronize()
                # Blocks cached while building (QLoRA's 16-bit weights) would count in the peak.
                gc.collect()
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            timer = _Timer(dev)
            warm: list[float] = []
            while len(warm) < max_warmup and not settled(warm):
                warm.append(timer.time(step))
            times = [timer.time(step) for _ in range(steps)]
        except Exception as exc:
            if not is_oom(exc):
                raise
            del model
            _free(dev)
            return oom_measurement(workload, gpu=dev.gpu, device_name=dev.name, source="probe",
                                   model_params=built, device=device_info, detail=str(exc).splitlines()[0])
    reserved = allocated = None
    if dev.kind == "cuda":
        reserved = float(torch.cuda.max_memory_reserved(dev.index))
        allocated = float(torch.cuda.max_memory_allocated(dev.index))
    note = "" if settled(warm) or max_warmup == 0 else (
        f"warm-up did not settle within {max_warmup} steps (last steps' CV >= 5 %)")
    del model, opt
    _free(dev)
    return build_measurement(
        workload, gpu=dev.gpu, device_name=dev.name, step_times=times, warmup_steps=len(warm), source="probe",
        peak_reserved_bytes=reserved, peak_allocated_bytes=allocated, model_params=built,
        trainable_params=trainable, device=device_info, notes=note,
    )


def _free(dev: Device) -> None:
    gc.collect()
    if dev.kind == "cuda":
        import torch

        torch.cuda.empty_cache()
