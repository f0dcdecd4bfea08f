from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from service.answers import estimate_answer
from service.commands._common import console, emit
from service.commands.workload_flags import (
    BatchOpt,
    CkptOpt,
    MethodOpt,
    ModelOpt,
    OptimizerOpt,
    PrecisionOpt,
    RankOpt,
    RequestOpt,
    SeqOpt,
    ShardingOpt,
    TokensOpt,
    request_from,
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
        f"{est.train_flops:.3g} FLOPs · {est.tokens_per_second:,.0f} tokens/s · MFU {est.mfu:.0%} · "
        f"{est.hours:.2f} h"
    )
    console.print(
        f"host: {est.host.ram_gb:.0f} GB RAM · {est.host.cpu_cores} CPU cores · {est.host.disk_gb:.0f} GB disk"
    )
    for note in est.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def register(app: typer.Typer) -> None:
    @app.command()
    def estimate(
        request: RequestOpt = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="GPU name, e.g. A100-80GB, 'rtx 4090'")] = None,
        gpus: Annotated[int | None, typer.Option("--gpus", min=1, max=4096, help="number of GPUs")] = None,
        model: ModelOpt = None,
        method: MethodOpt = None,
        precision: PrecisionOpt = None,
        optimizer: OptimizerOpt = None,
        micro_batch_size: BatchOpt = None,
        seq_len: SeqOpt = None,
        gradient_checkpointing: CkptOpt = None,
        sharding: ShardingOpt = None,
        lora_rank: RankOpt = None,
        tokens: TokensOpt = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/estimate shape)")] = False,
    ) -> None:
        """Estimate peak VRAM per GPU, host needs, throughput and hours for one job on one GPU type."""
        req = request_from(
            request,
            EstimateRequest,
            dict(
                model=model, method=method, precision=precision, optimizer=optimizer,
                micro_batch_size=micro_batch_size, seq_len=seq_len,
                gradient_checkpointing=gradient_checkpointing, sharding=sharding, lora_rank=lora_rank,
                tokens=tokens,
            ),
            {"gpu": gpu, "gpu_count": gpus},
        )
        result = estimate_answer(req)
        emit(result, as_json, render_estimate)
