"""Measure your own training script: the same Measurement record ``gpucost probe`` writes, from
your model, dataloader and loop. Needs torch only (for GPU timing and memory); transformers and
Lightning are used when you use their hooks, never imported otherwise.

A plain loop::

    from service.probe.hooks import measure_training

    with measure_training(workload, out="measurement.json", model=model) as probe:
        for batch in loader:
            with probe.step():
                loss = model(**batch).loss
                loss.backward(); opt.step(); opt.zero_grad()

transformers: ``Trainer(..., callbacks=[trainer_callback(workload, out="m.json")])``.
Lightning: ``Trainer(callbacks=[lightning_callback(workload, out="m.json")])``.

``workload`` is a ``Workload`` (or its JSON dict) whose micro-batch and checkpointing say what the
loop runs. The first ``warmup_steps`` steps are not timed. A step is one optimizer step; with
gradient accumulation its time is divided by the accumulation steps, so ``step_seconds`` stay per
micro-batch as ``gpucost probe`` records them. Then ``gpucost measurements add measurement.json``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from optimizer.errors import InvalidInput
from optimizer.estimator.workload import Workload
from optimizer.measurement import CPU, Measurement, Source
from service.probe.record import build_measurement, gpu_from_device_name

DEFAULT_WARMUP = 2


def _workload(value: Workload | dict[str, Any]) -> Workload:
    return value if isinstance(value, Workload) else Workload.model_validate(value)


def _torch() -> Any | None:
    try:
        import torch
    except ImportError:
        return None
    return torch


def base_params(model: Any) -> int | None:
    """Parameters of ``model`` as the workload's model counts them: adapters (``lora_``) left
    out, 4-bit packed weights counted at their unpacked shape."""
    if model is None:
        return None
    total = 0
    for name, p in model.named_parameters():
        if "lora_" in name:
            continue
        shape = getattr(getattr(p, "quant_state", None), "shape", None)
        if shape is not None:
            n = 1
            for d in shape:
                n *= int(d)
            total += n
        else:
            total += p.numel()
    return total


class StepTimer:
    """Times steps of a training loop and writes one Measurement when it is done."""

    def __init__(
        self, workload: Workload | dict[str, Any], *, out: str | Path | None = None, model: Any = None,
        gpu: str | None = None, warmup_steps: int = DEFAULT_WARMUP, accumulation_steps: int = 1,
        gpu_count: int = 1, source: Source = "training-loop",
    ) -> None:
        self.workload = _workload(workload)
        if self.workload.micro_batch_size == "auto":
            raise InvalidInput("workload.micro_batch_size", "give the micro-batch your loop runs")
        if self.workload.gradient_checkpointing == "auto":
            raise InvalidInput("workload.gradient_checkpointing", "say whether your loop checkpoints (true or false)")
        self.out = Path(out) if out is not None else None
        self.model = model
        self.gpu = gpu
        self.warmup_steps = max(0, warmup_steps)
        self.accumulation_steps = max(1, accumulation_steps)
        self.gpu_count = gpu_count
        self.source = source
        self.times: list[float] = []
        self.seen = 0
        self._t0: float | None = None
        self._torch = _torch()
        self._cuda = bool(self._torch is not None and self._torch.cuda.is_available())
        if self._cuda:
            self._torch.cuda.reset_peak_memory_stats()

    def _sync(self) -> None:
        if self._cuda:
            self._torch.cuda.synchronize()

    def begin(self) -> None:
        self._sync()
        self._t0 = time.perf_counter()

    def end(self) -> None:
        if self._t0 is None:
            return
        self._sync()
        elapsed = time.perf_counter() - self._t0
        self._t0 = None
        self.seen += 1
        if self.seen > self.warmup_steps:
            self.times.append(elapsed / self.accumulation_steps)

    @contextmanager
    def step(self) -> Iterator[None]:
        self.begin()
        yield
        self.end()

    def measurement(self) -> Measurement:
        if not self.times:
            raise InvalidInput("steps", f"no timed step: the loop ran {self.seen} step(s), {self.warmup_steps} of "
                               "them warm-up")
        reserved = allocated = None
        if self._cuda:
            index = self._torch.cuda.current_device()
            name = self._torch.cuda.get_device_name(index)
            gpu = self.gpu or gpu_from_device_name(name)
            if gpu is None:
                raise InvalidInput("gpu", f"{name!r} is not a GPU gpucost knows; pass gpu=NAME")
            reserved = float(self._torch.cuda.max_memory_reserved(index))
            allocated = float(self._torch.cuda.max_memory_allocated(index))
        else:
            name, gpu = CPU, CPU
        trainable = None
        if self.model is not None:
            trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return build_measurement(
            self.workload, gpu=gpu, device_name=name, step_times=self.times, warmup_steps=self.warmup_steps,
            source=self.source, gpu_count=self.gpu_count, peak_reserved_bytes=reserved,
            peak_allocated_bytes=allocated, model_params=base_params(self.model), trainable_params=trainable,
        )

    def write(self) -> Measurement:
        m = self.measurement()
        if self.out is not None:
            self.out.write_text(m.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return m


@contextmanager
def measure_training(workload: Workload | dict[str, Any], **options: Any) -> Iterator[StepTimer]:
    """A ``StepTimer`` for a plain loop; the record is written when the block ends without error."""
    timer = StepTimer(workload, **options)
    yield timer
    timer.write()


def trainer_callback(workload: Workload | dict[str, Any], **options: Any) -> Any:
    """A transformers ``TrainerCallback`` that times the Trainer's optimizer steps."""
    from transformers import TrainerCallback

    class GpucostCallback(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.timer: StepTimer | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            self.timer = StepTimer(workload, model=model,
                                   accumulation_steps=int(getattr(args, "gradient_accumulation_steps", 1) or 1),
                                   gpu_count=int(getattr(args, "world_size", 1) or 1), **options)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.timer is not None:
                self.timer.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.timer is not None:
                self.timer.end()

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.timer is not None and self.timer.times:
                self.timer.write()

    return GpucostCallback()


class _LightningHooks:
    """Lightning's callback methods, duck-typed: ``lightning_callback`` mixes in Lightning's
    ``Callback`` base where Lightning is installed; the methods need nothing of it."""

    def __init__(self, workload: Workload | dict[str, Any], options: dict[str, Any]) -> None:
        self._workload = workload
        self._options = options
        self.timer: StepTimer | None = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.timer = StepTimer(self._workload, model=pl_module, **self._options)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.timer is not None:
            self.timer.begin()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.timer is not None:
            self.timer.end()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.timer is not None and self.timer.times:
            self.timer.write()


def lightning_callback(workload: Workload | dict[str, Any], **options: Any) -> Any:
    """A Lightning callback timing each training batch (Lightning calls it per micro-batch)."""
    base: type | None = None
    for module in ("lightning.pytorch", "pytorch_lightning"):
        try:
            base = __import__(module, fromlist=["Callback"]).Callback
            break
        except ImportError:
            continue
    if base is None:
        return _LightningHooks(workload, options)
    cls = type("GpucostLightningCallback", (_LightningHooks, base), {})
    return cls(workload, options)  # _LightningHooks.__init__ comes first in the MRO

