"""The answers about runs, bills and spend, computed once for the HTTP API and the CLI.

``quote_calibration`` and ``save_quote_run`` are what a quote adds: the factors learnt from
reconciled bills, and the best option saved as a planned run when the request asks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from optimizer.errors import InvalidInput, StoreError
from optimizer.reconcile import match_lines, reconcile
from optimizer.results import Quote
from optimizer.runs import RUN_TAG, CalibrationFactor, PlannedRun, Reconciliation
from service.run_schemas import RunRequest, saved_note

# "team-month" (an extension of the contract's three) is what the page's quoted-vs-billed view shows.
SPEND_BY = ("team", "month", "run", "team-month")
UNMATCHED = "(unmatched)"


def full_store(prices: Any) -> Any:
    """The store behind ``prices``: the store itself, or the one a prepared reader opens."""
    if getattr(prices, "engine", None) is not None:
        return prices
    opener = getattr(prices, "_full_store", None)
    if opener is None:
        raise StoreError("runs need the price store")
    return opener()


# -- quotes --------------------------------------------------------------------------------------


def quote_calibration(req: Any, prices: Any) -> dict[tuple[str, str], CalibrationFactor]:
    """Factors for the quote, unless the request turned them off (``use_calibration: false``)."""
    if not getattr(req, "use_calibration", True):
        return {}
    from optimizer.bill_calibration import by_key

    db_file = getattr(prices, "db_file", None)
    if getattr(prices, "engine", None) is None and db_file is not None:
        # The CLI's prepared reader: read the small table with sqlite3, without SQLAlchemy.
        from pricing.store.calibration_peek import calibration_from_file

        return by_key(calibration_from_file(db_file))
    from pricing.store.runs import calibration

    try:
        return by_key(calibration(prices))
    except StoreError:
        return {}


def save_quote_run(req: Any, q: Quote, prices: Any) -> Quote:
    """Save the quote's best option as a planned run (``save_run``) and say how to tag it."""
    save = getattr(req, "save_run", None)
    if save is None:
        return q
    if q.best is None:
        raise InvalidInput("save_run", "nothing is feasible, so there is no option to save as a run")
    from pricing.store.runs import add_run

    best = q.best
    run = _planned_run(
        "save_run",
        run_id=save.run_id, team=save.team, job=save.job, option=best,
        quoted_usd=best.cost_usd / max(1, q.runs), quoted_hours=best.hours, snapshot_id=q.snapshot_id,
        created_at=datetime.now(UTC), resource_ids=list(save.resource_ids),
    )
    add_run(full_store(prices), run)
    q.saved_run = saved_note(run).model_dump()
    return q


# -- runs ----------------------------------------------------------------------------------------


def _planned_run(where: str, **fields: Any) -> PlannedRun:
    """A planned run from an option the caller gave or a quote chose; figures a run cannot hold
    (an option of a million hours, say) are the caller's bad input, named, not a server error."""
    try:
        return PlannedRun(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or where
        raise InvalidInput(f"{where}.{field}" if field != where else where, err.get("msg", "invalid")) from None


def add_run_answer(req: RunRequest, prices: Any) -> PlannedRun:
    from pricing.store.runs import add_run

    option, quoted_usd, quoted_hours, snapshot = req.option, req.quoted_usd, req.quoted_hours, req.snapshot_id
    if req.quote is not None:
        from service.answers import quote_answer
        from service.commands._common import parse_request
        from service.schemas import QuoteRequest

        qreq = parse_request({**req.quote, "save_run": None}, QuoteRequest, "quote")
        q = quote_answer(qreq, prices)
        if q.best is None:
            raise InvalidInput("quote", "nothing is feasible for this quote request, so there is no run to save")
        option, snapshot = q.best, q.snapshot_id
        quoted_usd = quoted_usd if quoted_usd is not None else q.best.cost_usd / max(1, q.runs)
        quoted_hours = quoted_hours if quoted_hours is not None else q.best.hours
    assert option is not None
    run = _planned_run(
        "option",
        run_id=req.run_id, team=req.team, job=req.job, option=option,
        quoted_usd=option.cost_usd if quoted_usd is None else quoted_usd,
        quoted_hours=option.hours if quoted_hours is None else quoted_hours,
        snapshot_id=snapshot, created_at=req.created_at or datetime.now(UTC),
        resource_ids=req.resource_ids, window_start=req.window_start, window_end=req.window_end,
    )
    return add_run(full_store(prices), run)


def list_runs_answer(prices: Any, team: str | None = None) -> list[PlannedRun]:
    from pricing.store.runs import list_runs

    return list_runs(full_store(prices), team)


# -- reconcile -----------------------------------------------------------------------------------


def parse_rates(values: list[str] | None, field: str = "--rate") -> dict[str, float]:
    """``EUR=1.08`` (USD per unit) items."""
    out: dict[str, float] = {}
    for item in values or []:
        code, _, rate = item.partition("=") if "=" in item else item.partition(":")
        try:
            value = float(rate)
        except ValueError:
            raise InvalidInput(field, f"{item!r}: give CUR=USD_PER_UNIT, e.g. EUR=1.08") from None
        if len(code.strip()) != 3 or not value > 0:
            raise InvalidInput(field, f"{item!r}: give CUR=USD_PER_UNIT with a 3-letter code and a positive rate")
        out[code.strip().upper()] = value
    return out


def reconcile_answer(
    data: bytes, fmt: str | None, prices: Any, *, rates: Mapping[str, float] | None = None,
    now: datetime | None = None,
) -> Reconciliation:
    """Read the whole bill (or fail naming the column), match it to the stored runs, store it in
    one transaction with the recomputed calibration, and answer."""
    from pricing.billing import read_bill
    from pricing.store.runs import calibration, file_digest, imported, list_runs, save_import

    bill = read_bill(data, fmt, rates=rates)
    store = full_store(prices)
    when = now or datetime.now(UTC)
    runs = list_runs(store)
    result = reconcile(bill.lines, runs, now=when)
    result.format = bill.format
    digest = file_digest(data)
    previous = imported(store, digest)
    if previous is not None:
        result.import_id, result.already_imported = previous, True
        result.calibration = calibration(store)
        return result
    matched, _ = match_lines(bill.lines, runs)
    matches = {ln.row: (rid, how) for rid, pairs in matched.items() for ln, how in pairs}
    result.import_id, result.calibration = save_import(store, digest, bill.format, bill.lines, matches, now=when)
    return result


# -- spend ---------------------------------------------------------------------------------------

# FOCUS column names (FOCUS 1.2 spec, CC BY 4.0); gpucost's own columns carry the spec's ``x_``
# prefix for custom columns, so FinOps tools load the file unchanged.
SPEND_COLUMNS = (
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
    "ServiceProviderName", "ProviderName", "ResourceId", "Tags", "BillingCurrency", "BilledCost",
    "EffectiveCost", "x_PlannedCost", "x_PlannedHours", "x_BilledHours", "x_Team", "x_RunId", "x_Month",
    "x_Lines",
)


def _month(d: datetime) -> str:
    return f"{d.year:04d}-{d.month:02d}"


def _month_bounds(month: str) -> tuple[datetime, datetime]:
    y, m = (int(x) for x in month.split("-"))
    start = datetime(y, m, 1, tzinfo=UTC)
    end = datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=UTC)
    return start, end


def spend_rows(prices: Any, by: str) -> list[dict[str, Any]]:
    """Planned (quoted) and billed spend per team, month or run, one dict per row with FOCUS names.

    Planned spend counts in the month the run was planned; billed spend in the month its charge
    period starts. Unmatched bill lines are their own team and run, ``(unmatched)``."""
    if by not in SPEND_BY:
        raise InvalidInput("--by", f"one of {', '.join(SPEND_BY)}")
    from pricing.store.runs import list_runs, stored_lines

    store = full_store(prices)
    runs = {r.run_id: r for r in list_runs(store)}
    groups: dict[str, dict[str, Any]] = {}

    def group(key: str) -> dict[str, Any]:
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"billed": Decimal(0), "effective": Decimal(0), "planned": 0.0, "planned_h": 0.0,
                               "billed_h": 0.0, "start": None, "end": None, "providers": set(), "resources": set(),
                               "teams": set(), "runs": set(), "lines": 0, "months": set()}
        return g

    def key_of(team: str | None, run_id: str, month: str) -> str:
        return {"team": team or UNMATCHED, "month": month, "run": run_id,
                "team-month": f"{team or UNMATCHED}|{month}"}[by]

    for r in runs.values():
        g = group(key_of(r.team, r.run_id, _month(r.created_at)))
        g["planned"] += r.quoted_usd
        g["planned_h"] += r.quoted_hours
        g["teams"].add(r.team or "")
        g["runs"].add(r.run_id)
        g["months"].add(_month(r.created_at))
        g["providers"].add(r.option.provider)
    for s in stored_lines(store):
        run = runs.get(s.run_id or "")
        team = run.team if run is not None else None
        g = group(key_of(team if run else UNMATCHED, s.run_id or UNMATCHED, _month(s.line.start)))
        ln = s.line
        g["billed"] += ln.billed_usd
        g["effective"] += ln.effective_usd
        if ln.category == "compute" and run is not None:
            per = run.option.gpus_per_node if ln.hours_per == "gpu" and run.option.gpus_per_node > 0 else 1.0
            g["billed_h"] += ln.hours / per / max(1, run.option.nodes)
        g["start"] = ln.start if g["start"] is None else min(g["start"], ln.start)
        g["end"] = ln.end if g["end"] is None else max(g["end"], ln.end)
        g["providers"].add(ln.provider)
        if ln.resource_id:
            g["resources"].add(ln.resource_id)
        g["teams"].add(team or UNMATCHED)
        g["runs"].add(s.run_id or UNMATCHED)
        g["months"].add(_month(ln.start))
        g["lines"] += 1
    out = []
    for key, g in sorted(groups.items()):
        team_key, _, month_key = key.partition("|") if by == "team-month" else (key, "", key)
        if by in ("month", "team-month"):
            start, end = _month_bounds(month_key)
        else:
            start, end = g["start"], g["end"]
        tags: dict[str, str] = {}
        if by == "run":
            tags[RUN_TAG] = key
        teams = sorted(t for t in g["teams"] if t)
        if by in ("team", "team-month"):
            tags["team"] = team_key
        elif len(teams) == 1:
            tags["team"] = teams[0]
        providers = sorted(g["providers"])
        out.append({
            "BillingPeriodStart": _month_bounds(_month(start))[0].isoformat() if start else None,
            "BillingPeriodEnd": _month_bounds(_month(start))[1].isoformat() if start else None,
            "ChargePeriodStart": start.isoformat() if start else None,
            "ChargePeriodEnd": end.isoformat() if end else None,
            "ChargeCategory": "Usage",
            "ServiceProviderName": ",".join(providers),
            "ProviderName": ",".join(providers),
            "ResourceId": ",".join(sorted(g["resources"])) or None,
            "Tags": json.dumps(tags, sort_keys=True),
            "BillingCurrency": "USD",
            # Unrounded (as FOCUS writes money): rows add up to the bill's own total.
            "BilledCost": float(g["billed"]),
            "EffectiveCost": float(g["effective"]),
            "x_PlannedCost": round(g["planned"], 2),
            "x_PlannedHours": round(g["planned_h"], 4),
            "x_BilledHours": round(g["billed_h"], 4),
            "x_Team": team_key if by in ("team", "team-month") else (teams[0] if len(teams) == 1 else None),
            "x_RunId": key if by == "run" else None,
            "x_Month": month_key if by in ("month", "team-month") else (
                sorted(g["months"])[0] if len(g["months"]) == 1 else None),
            "x_Lines": g["lines"],
        })
    return out


def spend_frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows, columns=list(SPEND_COLUMNS))


def spend_csv(rows: list[dict[str, Any]]) -> str:
    return spend_frame(rows).to_csv(index=False)  # type: ignore[no-any-return]


def spend_parquet(rows: list[dict[str, Any]]) -> bytes:
    import io

    buf = io.BytesIO()
    spend_frame(rows).to_parquet(buf, index=False)
    return buf.getvalue()

