"""``gpucost offers`` and ``gpucost prices refresh|status|history|import``."""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from optimizer.errors import InvalidInput
from optimizer.offer import Offer
from service.commands._common import console, emit, err_console, open_store_from_settings, parse_csv_list

JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document")]


def _money(v: float | None) -> str:
    return "-" if v is None else f"${v:,.4f}"


def _offers_table(doc: dict[str, Any]) -> None:
    offers = doc["offers"]
    if not offers:
        console.print("no matching offers")
        return
    table = Table(title=f"{len(offers)} offers, cheapest first")
    for col in ("provider", "region", "instance type", "GPUs", "$/h", "spot $/h", "committed $/h", "as of"):
        table.add_column(col, justify="right" if "$" in col else "left", no_wrap=col in {"GPUs", "$/h"})
    for o in offers:
        where = f"{o['region']}/{o['zone']}" if o["zone"] else o["region"]
        # The lowest effective rate of its commitments (terms in --json), with how many there are.
        terms = o.get("commitments") or []
        low = min((c["effective_hourly_usd"] for c in terms), default=None)
        table.add_row(
            o["provider"], where, o["instance_type"], f"{o['gpu_count']:g}x {o['gpu']}",
            _money(o["price_hour"]), _money(o["spot_price_hour"]),
            f"{_money(low)} ({len(terms)})" if terms else "-", str(o["as_of"])[:10],
        )
    console.print(table)


def _status_table(doc: dict[str, Any]) -> None:
    table = Table(title="Price freshness per provider")
    for col in ("provider", "rows", "as of", "age h", "last attempt", "last error", "stale"):
        table.add_column(col)
    for p in doc["providers"]:
        table.add_row(
            p["provider"], str(p["rows"]), str(p["as_of"] or "-")[:19],
            "-" if p["age_hours"] is None else f"{p['age_hours']:.1f}",
            str(p["last_attempt"] or "-")[:19], p["last_error"] or "",
            "[red]stale[/red]" if p["stale"] else "[green]fresh[/green]",
        )
    console.print(table)
    lease = doc.get("lease")
    if lease and lease["alive"]:
        console.print(f"refresh running: {lease['holder']} since {str(lease['acquired_at'])[:19]}")
    for run in doc.get("runs", []):
        if run["status"] == "aborted":
            console.print(f"aborted refresh of {run['source']} started {str(run['started_at'])[:19]} by {run['holder']}")


def _history_table(doc: dict[str, Any]) -> None:
    points = doc["points"]
    table = Table(title=f"Price history of {doc['instance_type']}")
    for col in ("fetched", "as of", "provider", "region", "zone", "$/h", "spot $/h", "current", "source"):
        table.add_column(col)
    for p in points:
        table.add_row(
            str(p["fetched_at"])[:19], str(p["as_of"])[:19], p["provider"], p["region"], p["zone"] or "",
            _money(p["price_hour"]), _money(p["spot_price_hour"]), "yes" if p["is_current"] else "",
            p["source"],
        )
    console.print(table)


def _results_table(doc: dict[str, Any]) -> None:
    table = Table(title="Refresh")
    for col in ("provider", "status", "rows", "before", "attempts", "seconds", "error / note"):
        table.add_column(col)
    colour = {"updated": "green", "unchanged": "cyan", "skipped": "yellow", "failed": "red"}
    for r in doc["results"]:
        table.add_row(
            r["provider"], f"[{colour[r['status']]}]{r['status']}[/]", str(r["rows"]),
            "-" if r["previous_rows"] is None else str(r["previous_rows"]), str(r["attempts"]),
            f"{r['seconds']:.2f}", r["error"] or r["note"] or "",
        )
    console.print(table)


def _import_table(doc: dict[str, Any]) -> None:
    table = Table(title=f"Imported {doc['format']} catalog: {doc['total_rows']} offers")
    for col in ("provider", "rows", "before", "status", "snapshot"):
        table.add_column(col)
    for r in doc["imported"]:
        table.add_row(
            r["provider"], str(r["rows"]), "-" if r["previous_rows"] is None else str(r["previous_rows"]),
            r["status"], str(r["snapshot"]),
        )
    console.print(table)
    if doc.get("skipped"):
        console.print("skipped rows: " + "; ".join(f"{why}: {n}" for why, n in doc["skipped"].items()))
    out = doc.get("outliers") or {}
    if out.get("count"):
        examples = ", ".join(
            f"{e['provider']}/{e['region']} {e['instance_type']} ({e['ratio']:.2f}x)" for e in out["examples"][:5]
        )
        console.print(
            f"[yellow]{out['count']} offers priced over 2x away from their provider's median for the GPU[/yellow]"
            f" (kept; worth a look): {examples}"
        )


def _outlier_doc(rows: list[Offer], examples: int = 20) -> dict[str, Any]:
    from pricing.validate import price_outliers

    flagged = price_outliers(rows)
    # One example per instance and region: zones of one region repeat the same price.
    unique: dict[tuple[str, str, str], tuple[Offer, float]] = {}
    for o, ratio in flagged:
        unique.setdefault((o.provider, o.region, o.instance_type), (o, ratio))
    return {
        "count": len(flagged),
        "examples": [
            {
                "provider": o.provider, "region": o.region, "instance_type": o.instance_type, "gpu": o.gpu,
                "price_per_gpu_hour": round((o.price_hour or 0.0) / o.gpu_count, 6), "ratio": round(ratio, 3),
            }
            for o, ratio in list(unique.values())[:examples]
        ],
    }


class _Bars:
    """rich progress bars on stderr, one per provider, advanced stage by stage."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def __call__(self, provider: str, stage: str) -> None:
        from pricing.refresh import STAGES

        if provider not in self.tasks:
            self.tasks[provider] = self.progress.add_task(provider, total=len(STAGES), stage="starting")
        task = self.tasks[provider]
        if stage in STAGES:
            self.progress.update(task, completed=STAGES.index(stage), stage=stage)
        elif stage in ("done", "skipped", "failed"):
            self.progress.update(task, completed=len(STAGES), stage=stage)


def register(app: typer.Typer) -> None:
    @app.command()
    def offers(
        gpu: Annotated[str | None, typer.Option(help="GPU name or alias, e.g. A100")] = None,
        count: Annotated[float | None, typer.Option("--count", help="GPUs per instance")] = None,
        provider: Annotated[str | None, typer.Option(help="comma-separated, e.g. aws,gcp")] = None,
        region: Annotated[str | None, typer.Option(help="comma-separated regions")] = None,
        spot: Annotated[bool, typer.Option("--spot/--no-spot", help="rank by spot price")] = False,
        max_hourly: Annotated[float | None, typer.Option(min=0, help="USD per instance-hour")] = None,
        limit: Annotated[int | None, typer.Option(min=1)] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List offers, cheapest first."""
        if count is not None and count <= 0:
            raise InvalidInput("count", "must be > 0")
        store = open_store_from_settings()
        rows = store.offers(
            gpu=gpu, gpu_count=count, providers=parse_csv_list(provider), regions=parse_csv_list(region),
            spot=spot, max_hourly=max_hourly, limit=limit,
        )
        from service.schemas import OffersResponse

        doc = OffersResponse(offers=rows)
        emit(doc, as_json, lambda d: _offers_table(d.model_dump(mode="json")))

    prices = typer.Typer(help="Refresh, inspect and import prices.", no_args_is_help=True)
    app.add_typer(prices, name="prices")

    @prices.command("refresh")
    def refresh_cmd(
        provider: Annotated[str | None, typer.Option(help="comma-separated sources; default all")] = None,
        force: Annotated[
            bool, typer.Option("--force", help="accept a >50% drop in rows of the --provider sources named")
        ] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Fetch prices from the providers' APIs (for cron or a Kubernetes CronJob)."""
        from pricing.refresh import refresh_exclusive, refresh_summary, summary_line
        from service.api.routes.prices import RefreshResponse
        from service.settings import get_settings

        store = open_store_from_settings()
        settings = get_settings().source_settings()
        columns = (
            TextColumn("{task.description:<10}"), BarColumn(), TextColumn("{task.fields[stage]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=err_console, transient=as_json) as bars:
            results = refresh_exclusive(
                store, settings, providers=parse_csv_list(provider), force=force, progress=_Bars(bars)
            )
        doc = RefreshResponse(results=results)
        emit(doc, as_json, lambda d: _results_table(d.model_dump(mode="json")))
        summary = doc.summary or refresh_summary(results)
        err_console.print(summary_line(summary), markup=False, highlight=False)
        # Non-zero when a source failed, or when nothing asked for was refreshed (all skipped).
        if summary.failed or summary.nothing_refreshed:
            raise typer.Exit(1)

    @prices.command("status")
    def status_cmd(as_json: JsonOpt = False) -> None:
        """Rows, as-of date, last attempt and error, and staleness per provider."""
        from service.api.routes.prices import prices_status_doc
        from service.settings import get_settings

        store = open_store_from_settings()
        doc = prices_status_doc(store, get_settings().stale_after_days)
        emit(doc, as_json, lambda d: _status_table(d.model_dump(mode="json")))
        if doc.problems:
            for problem in doc.problems:
                err_console.print(f"damaged store: {problem}", markup=False, highlight=False)
            raise typer.Exit(1)

    @prices.command("history")
    def history_cmd(
        instance: Annotated[str, typer.Option("--instance", help="instance type, e.g. p4d.24xlarge")],
        region: Annotated[str | None, typer.Option(help="e.g. us-east-1")] = None,
        provider: Annotated[str | None, typer.Option(help="e.g. aws")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Every recorded price of one instance type, oldest first."""
        from service.api.routes.prices import history_response

        doc = history_response(open_store_from_settings(), instance, region, provider)
        emit(doc, as_json, lambda d: _history_table(d.model_dump(mode="json")))

    @prices.command("import")
    def import_cmd(
        path: Annotated[Path, typer.Argument(help="a vms.csv, or a folder of <cloud>/vms.csv")],
        fmt: Annotated[str, typer.Option("--format", help="catalog format: skypilot")] = "skypilot",
        force: Annotated[bool, typer.Option("--force", help="accept a >50% drop in rows")] = False,
        as_of: Annotated[
            str | None,
            typer.Option("--as-of", help="date the catalog's prices were true (YYYY-MM-DD); default: today"),
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Load a price catalog file; each cloud in it becomes that provider's current prices.

        Give ``--as-of`` when the catalog is older than today, so staleness is judged honestly."""
        if fmt != "skypilot":
            raise InvalidInput("format", f"unsupported catalog format {fmt!r}; supported: skypilot")
        if not path.exists():
            raise InvalidInput("path", f"{path} does not exist")
        from pricing.adapters.skypilot_csv import load_skypilot_report
        from pricing.refresh import store_rows

        stamp = None
        if as_of is not None:
            try:
                stamp = date.fromisoformat(as_of)
            except ValueError:
                raise InvalidInput("as_of", f"{as_of!r} is not a date (YYYY-MM-DD)") from None
        try:
            rows, report = load_skypilot_report(path, as_of=stamp)
        except UnicodeDecodeError:
            raise InvalidInput("path", f"{path} is not UTF-8 text: is it a SkyPilot vms.csv?") from None
        except (csv.Error, ValueError) as exc:  # NUL bytes, a field over the csv module's limit
            raise InvalidInput("path", f"{path} is not a readable CSV catalog: {str(exc)[:160]}") from None
        store = open_store_from_settings()
        infos = store_rows(store, "skypilot", rows, fetched_at=datetime.now(UTC), force=force)
        for info in infos:
            store.record_attempt(info.provider, None)
        doc = {
            "format": fmt,
            "path": str(path),
            "total_rows": sum(i.row_count for i in infos),
            "skipped": dict(sorted(report.skipped.items())),
            "outliers": _outlier_doc(rows),
            "imported": [
                {
                    "provider": i.provider, "rows": i.row_count, "previous_rows": i.previous_rows,
                    "status": "updated" if i.changed else "unchanged", "snapshot": i.id, "source": i.source,
                }
                for i in infos
            ],
        }
        emit(doc, as_json, _import_table)
