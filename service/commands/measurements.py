"""``gpucost measurements add FILE | list | remove ID``: measured recipes every answer uses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from optimizer.errors import InvalidInput
from service.commands._common import emit, open_store_from_settings

JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document")]


def _table(doc: dict[str, Any]) -> None:
    from rich.table import Table

    from service.commands._common import console

    rows = doc["measurements"]
    if not rows:
        console.print("no measurements stored (gpucost probe ... --out m.json; gpucost measurements add m.json)")
        return
    table = Table(title=f"{len(rows)} measurement(s), newest first")
    for col in ("id", "GPU", "model", "recipe", "tokens/s", "step s (p10-p90)", "peak GB", "source", "measured"):
        table.add_column(col)
    for m in rows:
        w = m["workload"]
        model = w["model"] if isinstance(w["model"], str) else (w["model"].get("name") or "custom")
        ckpt = ", ckpt" if w.get("gradient_checkpointing") else ""
        recipe = f"{w.get('method', 'full')} {w.get('precision', 'bf16')} mb{w.get('micro_batch_size')} x {w.get('seq_len')}{ckpt}"
        s = m.get("step_seconds")
        steps = f"{s['median']:.4g} ({s['p10']:.4g}-{s['p90']:.4g})" if s else "-"
        tps = f"{m['tokens_per_second']:,.0f}" if m.get("tokens_per_second") else ("OOM" if not m["fits"] else "-")
        peak = f"{m['peak_vram_gb']:.2f}" if m.get("peak_vram_gb") is not None else "-"
        table.add_row(m["id"], f"{m['gpu_count']}x {m['gpu']}", model, recipe, tps, steps, peak, m["source"],
                      str(m["measured_at"])[:10])
    console.print(table)


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Measured training steps (gpucost probe, training-loop hooks) that answers use.",
                        no_args_is_help=True)
    app.add_typer(group, name="measurements")

    @group.command("add")
    def add(
        file: Annotated[Path, typer.Argument(help="a Measurement JSON file (one object, a list, or JSON lines)")],
        as_json: JsonOpt = False,
    ) -> None:
        """Store measurement records; every record is checked first, and none is stored if one is bad."""
        from pricing.store.measurements import add_measurement
        from service.measurements import read_records

        records = read_records(file)
        store = open_store_from_settings()
        try:
            added = [add_measurement(store, m) for m in records]
        finally:
            store.close()
        doc = {"measurements": [m.model_dump(mode="json") for m, _ in added],
               "added": [m.id for m, new in added if new], "already_stored": [m.id for m, new in added if not new]}
        if as_json:
            emit(doc, True)
            return
        for m, new in added:
            typer.echo(f"{'added' if new else 'already stored'}: {m.id} ({m.gpu_count}x {m.gpu}, {m.source})")

    @group.command("list")
    def list_cmd(as_json: JsonOpt = False) -> None:
        """The stored measurements, newest first."""
        from pricing.store.measurements import list_measurements

        store = open_store_from_settings()
        try:
            doc = {"measurements": [m.model_dump(mode="json") for m in list_measurements(store)]}
        finally:
            store.close()
        emit(doc, as_json, _table)

    @group.command("remove")
    def remove(
        measurement_id: Annotated[str, typer.Argument(metavar="ID", help="the measurement's id (gpucost measurements list)")],
        as_json: JsonOpt = False,
    ) -> None:
        """Remove one measurement: answers go back to the model's figures for its recipe."""
        from pricing.store.measurements import remove_measurement

        store = open_store_from_settings()
        try:
            gone = remove_measurement(store, measurement_id)
        finally:
            store.close()
        if not gone:
            raise InvalidInput("ID", f"no measurement {measurement_id!r} (gpucost measurements list)")
        if as_json:
            emit({"removed": measurement_id}, True)
        else:
            typer.echo(f"removed: {measurement_id}")
