"""Spot risk and quota state per cloud option, in Markdown (``optimizer.spot_risk``, ``optimizer.quotas``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from optimizer.results import Option
from service.render.labels import region_label


def quota_label(o: Option) -> str:
    """``ok``/``short``/``unknown`` with the code, need and limit where known."""
    state = o.quota or "unknown"
    d: dict[str, Any] = o.quota_detail or {}
    if not d.get("code"):
        return state
    limit = "?" if d.get("limit") is None else f"{d['limit']:g}"
    return f"{state} ({d['code']}: need {d['need']:g} / limit {limit} {d.get('unit') or ''})".replace(" )", ")")


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f} h"


def spot_label(r: dict[str, Any] | None) -> tuple[str, str, str, str]:
    """(reclaims/h and source, expected / p90 cost, expected / p90 hours, chance of meeting the deadline)."""
    if not r:
        return ("-", "-", "-", "-")
    source = r.get("bucket") or ("prior" if str(r.get("source", "")).startswith("prior") else r.get("source", ""))
    meets = "-" if r.get("p_meets_deadline") is None else f"{r['p_meets_deadline']:.0%}"
    if r.get("fallback") and r.get("p_fallback"):
        meets += f" (on demand in {r['p_fallback']:.0%})"
    return (
        f"{r['interruptions_per_hour']:.4f}/h ({source})",
        f"{_usd(r.get('expected_cost_usd'))} / {_usd(r.get('p90_cost_usd'))}",
        f"{_h(r.get('expected_hours'))} / {_h(r.get('p90_hours'))}",
        meets,
    )


def risk_rows(options: Iterable[Option | None]) -> list[tuple[str, ...]]:
    rows = []
    seen: set[tuple[str, str | None, str, int, str]] = set()
    for o in options:
        if o is None or o.kind != "cloud":
            continue
        key = (o.provider, o.region, o.instance_type, o.nodes, o.pricing)
        if key in seen:
            continue
        seen.add(key)
        where = f"{o.provider}/{region_label(o.region)} `{o.instance_type}`" + (f" x{o.nodes}" if o.nodes > 1 else "")
        rows.append((where, o.pricing.replace("_", "-"), quota_label(o), *spot_label(o.spot_risk)))
    return rows


def risk_section(options: Iterable[Option | None]) -> list[str]:
    """Markdown lines: quota state for every cloud option, spot risk for spot ones (empty: no cloud option)."""
    rows = risk_rows(options)
    if not rows:
        return []
    from service.render.markdown import table

    return [
        "Spot risk and quotas (spot cost and hours per run, fallback to on demand counted; "
        "a quota is `unknown` until `gpucost quotas refresh` or GPUCOST_QUOTAS gives it):",
        "",
        table(["option", "pricing", "quota", "reclaims (source)", "cost expected / p90", "hours expected / p90",
               "meets deadline"], rows),
        "",
    ]
