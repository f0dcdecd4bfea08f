"""``gpucost probe``: time real training steps of the job on this machine's GPU (or CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from optimizer.errors import InvalidInput
from service.commands._common import emit
from service.commands.workload_flags import WORKLOAD_FLAGS, RequestOpt, request_from, with_flags, workload_fields
from service.schemas import EstimateRequest


def _summary(m: Any) -> None:
    from service.commands._common import console

    w = m.workload
    if not m.fits:
        console.print(f"[red]{m.notes}[/red] on {m.device_name} ({m.gpu}); id {m.id}")
        return
    s = m.step_seconds
    console.print(
        f"{m.device_name} ({m.gpu}): {w.method} {w.precision}, micro-batch {w.micro_batch_size} x {w.seq_len}"
        f"{', checkpointing' if w.gradient_checkpointing else ''}: {m.tokens_per_second:,.1f} tokens/s, "
        f"step {s.median:.4g} s (p10 {s.p10:.4g}, p90 {s.p90:.4g}) over {m.steps} steps after {m.warmup_steps} warm-up"
    )
    if m.peak_vram_gb is not None:
        console.print(f"peak memory {m.peak_vram_gb:.2f} GB reserved, {m.allocated_peak_gb:.2f} GB allocated"
                      + (f" · MFU {m.mfu:.0%}" if m.mfu is not None else ""))
    if m.notes:
        console.print(f"[yellow]note:[/yellow] {m.notes}")
    console.print(f"id {m.id} · store it with: gpucost measurements add FILE (--out FILE writes it)")


def register(app: typer.Typer) -> None:
    @app.command()
    @with_flags(WORKLOAD_FLAGS)
    def probe(
        flags: dict[str, Any],
        request: RequestOpt = None,
        gpu_index: Annotated[int | None, typer.Option("--gpu-index", min=0, help="CUDA device to probe (default 0)")] = None,
        device: Annotated[str | None, typer.Option("--device", help="cpu: probe on the CPU (tiny models)")] = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="gpucost name of the card, if its device name is not known")] = None,
        steps: Annotated[int, typer.Option("--steps", min=1, max=10_000, help="timed steps")] = 20,
        warmup: Annotated[int, typer.Option("--warmup", min=0, max=10_000,
                                            help="most warm-up steps (stops earlier once step time settles)")] = 20,
        out: Annotated[Path | None, typer.Option("--out", help="write the measurement JSON to this file")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the Measurement JSON")] = False,
    ) -> None:
        """Build the job's model with random weights and time real training steps; prints one Measurement."""
        if device is not None and gpu_index is not None:
            raise InvalidInput("--device", "give --device cpu or --gpu-index N, not both")
        req = request_from(request, EstimateRequest, workload_fields(flags))
        from service.probe.run import probe as run_probe

        m = run_probe(req.workload, device=device, gpu_index=gpu_index, gpu=gpu, steps=steps, max_warmup=warmup)
        if out is not None:
            try:
                out.write_text(m.model_dump_json(indent=2) + "\n", encoding="utf-8")
            except OSError as exc:
                raise InvalidInput("--out", f"cannot write {out}: {exc.strerror or exc}") from None
        emit(m, as_json, _summary)
