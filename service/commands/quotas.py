"""``gpucost quotas refresh | list``: the account limits options are checked against."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from service.commands._common import console, emit, open_store_from_settings, parse_csv_list

JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document")]


def _list_table(doc: dict[str, Any]) -> None:
    from rich.table import Table

    if not doc["quotas"]:
        console.print("no quotas known: every option's quota is 'unknown' "
                      "(run `gpucost quotas refresh` with cloud credentials, or set GPUCOST_QUOTAS)")
        return
    table = Table(title="Quotas")
    for col in ("provider", "region", "code", "limit", "unit", "source"):
        table.add_column(col, justify="right" if col == "limit" else "left")
    for q in doc["quotas"]:
        table.add_row(q["provider"], q["region"], q["code"], f"{q['limit']:g}", q["unit"] or "", q["source"])
    console.print(table)


def _results_table(doc: dict[str, Any]) -> None:
    for r in doc["results"]:
        extra = f" ({r['detail']})" if r["detail"] else ""
        console.print(f"{r['provider']}: {r['status']}, {r['rows']} quotas{extra}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    quotas = typer.Typer(help="Read and list the account quotas options are checked against.", no_args_is_help=True)
    app.add_typer(quotas, name="quotas")

    @quotas.command("refresh")
    def refresh_cmd(
        provider: Annotated[str | None, typer.Option(help="comma-separated: aws, gcp; default both")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Read AWS Service Quotas and GCP GPU quotas into the store (skips a cloud without credentials)."""
        from pricing.quotas import refresh_quotas
        from pricing.quotas.refresh import READERS
        from service.settings import get_settings

        names = parse_csv_list(provider)
        for name in names or []:
            if name not in READERS:
                from optimizer.errors import InvalidInput

                raise InvalidInput("--provider", f"no quota reader for {name!r} (known: {', '.join(READERS)})")
        store = open_store_from_settings()
        results = refresh_quotas(store, get_settings().source_settings(), names)
        emit({"results": [r.as_dict() for r in results]}, as_json, _results_table)
        if any(r.status == "error" for r in results):
            raise typer.Exit(1)

    @quotas.command("list")
    def list_cmd(as_json: JsonOpt = False) -> None:
        """The limits quotes check options against: stored ones, with GPUCOST_QUOTAS over them."""
        from service.api.routes.quotas import quotas_doc
        from service.settings import get_settings

        store = open_store_from_settings()
        emit(quotas_doc(store, get_settings().quotas), as_json, _list_table)
