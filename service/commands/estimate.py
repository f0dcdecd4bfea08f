from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from service.answers import estimate_answer
from service.commands._common import console, emit, output_mode
from service.commands.workload_flags import (
    WORKLOAD_FLAGS,
    RequestOpt,
    request_from,
    with_flags,
    workload_fields,
)
from service.schemas import Estimate, EstimateRequest


def render_estimate(est: Estimate) -> None:
    mem = est.memory_gb
    table = Table(title=f"Peak memory per GPU on {est.gpu_count}x {est.gpu} ({est.sharding})")
    table.add_column("part")
    table.add_column("GB", justify="right")
    for part in ("weights", "gradients", "optimizer", "activations", "overhead"):
        table.add_row(part, f"{getattr(mem, part):.2f}")
    table.add_row("[bold]total per GPU[/bold]", f"[bold]{mem.total_per_gpu:.2f}[/bold]")
    table.add_row("GPU VRAM", f"{est.gpu_vram_gb:g}")
    console.print(table)
    verdict = "[green]fits[/green]" if est.fits else "[red]does not fit[/red]"
    console.print(
        f"{verdict} · params {est.params / 1e9:.2f}B (trainable {est.trainable_params / 1e6:.1f}M) · "
        f"{est.train_flops:.3g} FLOPs · {est.tokens_per_second:,.0f} tokens/s "
        f"({est.samples_per_second:,.1f} samples/s) · MFU {est.mfu:.0%} · "
        f"{est.hours:.2f} h"
    )
    console.print(
        f"host: {est.host.ram_gb:.0f} GB RAM · {est.host.cpu_cores} CPU cores · {est.host.disk_gb:.0f} GB disk"
    )
    if est.range:
        lo, hi = est.range["total_per_gpu"]
        tlo, thi = est.range["tokens_per_second"]
        console.print(f"range: {lo:.1f}-{hi:.1f} GB per GPU · {tlo:,.0f}-{thi:,.0f} tokens/s")
    if est.basis != "model":
        console.print(f"basis: [bold]{est.basis}[/bold] (measurement {est.measurement_id})")
    for warning in est.warnings:
        console.print(f"[red]warning:[/red] {warning}")
    for note in est.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def register(app: typer.Typer) -> None:
    @app.command()
    @with_flags(WORKLOAD_FLAGS)
    def estimate(
        flags: dict[str, Any],
        request: RequestOpt = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="GPU name, e.g. A100-80GB, 'rtx 4090'")] = None,
        gpus: Annotated[int | None, typer.Option("--gpus", min=1, max=4096, help="number of GPUs")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/estimate shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
    ) -> None:
        """Estimate peak VRAM per GPU, host needs, throughput and hours for one job on one GPU type."""
        mode = output_mode(as_json, markdown)
        req = request_from(request, EstimateRequest, workload_fields(flags), {"gpu": gpu, "gpu_count": gpus})
        from service.measurements import measurements_at
        from service.settings import get_settings

        # Stored measurements of this recipe replace or scale the model's figures (basis).
        result = estimate_answer(req, measurements_at(get_settings().db_url))
        if mode == "markdown":
            from service.render.markdown import estimate_markdown

            sys.stdout.write(estimate_markdown(result))
            return
        emit(result, mode == "json", render_estimate)
