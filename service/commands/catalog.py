from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from optimizer.estimator.gpus import all_gpus
from optimizer.estimator.shapes import list_presets
from service.commands._common import console, emit


def _gpu_table(doc: dict[str, Any]) -> None:
    table = Table(title="GPUs")
    for col in ("name", "class", "VRAM GB", "BW GB/s", "bf16/fp16 TFLOPs", "TDP W", "link"):
        table.add_column(col)
    for g in doc["gpus"]:
        tensor = g["bf16_tensor_tflops"] or g["fp16_tensor_tflops"]
        table.add_row(
            g["name"], g["gpu_class"], f"{g['vram_gb']:g}", f"{g['mem_bw_gbs']:g}", f"{tensor:g}",
            f"{g['tdp_w']:g}", g["interconnect"],
        )
    console.print(table)


def _model_table(doc: dict[str, Any]) -> None:
    table = Table(title="Model presets")
    for col in ("name", "arch", "params", "layers", "hidden", "heads", "kv", "vocab"):
        table.add_column(col)
    for m in doc["models"]:
        table.add_row(
            str(m["name"]), str(m.get("arch", "")), f"{m['params'] / 1e9:.2f}B", str(m.get("layers", "")),
            str(m.get("hidden", "")), str(m.get("heads", "")), str(m.get("kv_heads", "")), str(m.get("vocab", "")),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command()
    def gpus(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        """List known GPUs with their specs and sources."""
        emit({"gpus": [g.public() for g in all_gpus()]}, as_json, _gpu_table)

    @app.command()
    def models(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        """List model presets."""
        emit({"models": list_presets()}, as_json, _model_table)
