"""AWS Cost and Usage Report 2.0 (Data Exports), CSV or Parquet; legacy CUR column names too.

CUR 2.0 columns are snake_case (``line_item_unblended_cost``); the legacy report's
``lineItem/UnblendedCost`` and ``resourceTags/user:NAME`` are turned into the same names. Tags
come from the ``resource_tags`` map (``user:NAME`` or ``user_NAME`` keys; AWS Data Exports
"Resource tags columns", read 2026-12). Billed is ``line_item_unblended_cost``. Effective: for
``SavingsPlanCoveredUsage`` the ``savings_plan_savings_plan_effective_cost``, for ``DiscountedUsage``
(reservations) the ``reservation_effective_cost``, 0 for ``SavingsPlanNegation`` (it cancels the
covered line's on-demand cost on the invoice), else the unblended cost.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal

from optimizer.runs import BillLine, Category
from pricing.billing.table import BillFileError, decimal_at, json_at, quantity_at, require, time_at, usd_converter

REQUIRED = ("line_item_unblended_cost", "line_item_currency_code", "line_item_usage_start_date",
            "line_item_usage_end_date", "line_item_line_item_type")
COLUMNS = frozenset((*REQUIRED, "savings_plan_savings_plan_effective_cost", "reservation_effective_cost",
                     "line_item_usage_type", "line_item_usage_amount", "resource_tags", "line_item_resource_id",
                     "line_item_product_code", "line_item_line_item_description"))
COMPUTE_TYPES = ("BoxUsage", "SpotUsage", "DedicatedUsage", "HostUsage", "ReservedHostUsage")


def snake(legacy: str) -> str:
    """``lineItem/UnblendedCost`` -> ``line_item_unblended_cost``."""
    joined = legacy.replace("/", "_")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", joined).lower()


def normal_rows(rows: Sequence[Mapping[str, str | None]]) -> list[dict[str, str | None]]:
    """Legacy CUR rows renamed to CUR 2.0 names, their tag columns gathered into ``resource_tags``."""
    if not rows or not any("/" in k for k in rows[0]):
        return [dict(r) for r in rows]
    import json

    out = []
    for r in rows:
        tags = {k.split("/", 1)[1]: v for k, v in r.items() if k.startswith("resourceTags/") and v}
        row = {snake(k): v for k, v in r.items() if not k.startswith("resourceTags/")}
        row["resource_tags"] = json.dumps(tags) if tags else None
        out.append(row)
    return out


def pick(header: list[str]) -> list[str]:
    return [c for c in header if c in COLUMNS or c.startswith("resourceTags/") or snake(c) in COLUMNS]


def tag_key(key: str) -> str:
    for prefix in ("user:", "user_", "aws:", "aws_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    return key.replace("_", "-") if key.replace("_", "-") == "gpucost-run-id" else key


def category_of(usage_type: str) -> Category:
    if any(t in usage_type for t in COMPUTE_TYPES):
        return "compute"
    if "EBS:" in usage_type or "TimedStorage" in usage_type or "SnapshotUsage" in usage_type:
        return "storage"
    if "DataTransfer-Out" in usage_type or "-Out-Bytes" in usage_type or "AWS-Out" in usage_type:
        return "egress"
    return "other"


def read_cur2(rows: Sequence[Mapping[str, str | None]], rates: Mapping[str, float] | None = None) -> list[BillLine]:
    rows = normal_rows(rows)
    require(rows[0].keys() if rows else (), REQUIRED, "AWS CUR 2.0")
    currencies = Counter((r.get("line_item_currency_code") or "").upper() for r in rows)
    usd = usd_converter(currencies, "line_item_currency_code", rates)
    out = []
    for n, r in enumerate(rows, 2):
        cur = (r.get("line_item_currency_code") or "").upper()
        kind = r.get("line_item_line_item_type") or ""
        billed = decimal_at(r, "line_item_unblended_cost", n)
        if kind == "SavingsPlanCoveredUsage":
            effective = decimal_at(r, "savings_plan_savings_plan_effective_cost", n)
        elif kind == "DiscountedUsage":
            effective = decimal_at(r, "reservation_effective_cost", n)
        elif kind == "SavingsPlanNegation":
            effective = Decimal(0)
        else:
            effective = billed
        usage_type = r.get("line_item_usage_type") or ""
        category = category_of(usage_type)
        amount = quantity_at(r, "line_item_usage_amount", n)
        tags = json_at(r, "resource_tags", n) or {}
        if not isinstance(tags, dict):
            raise BillFileError("resource_tags", f"row {n}: must be a map of tag keys to values")
        start, end = time_at(r, "line_item_usage_start_date", n), time_at(r, "line_item_usage_end_date", n)
        if end < start:
            raise BillFileError("line_item_usage_end_date", f"row {n}: before line_item_usage_start_date")
        out.append(BillLine(
            row=n, billed_usd=usd(cur, billed), effective_usd=usd(cur, effective), start=start, end=end,
            provider="aws", category=category,
            hours=amount if category == "compute" and kind != "SavingsPlanNegation" else 0.0,
            resource_id=r.get("line_item_resource_id"),
            tags={tag_key(str(k)): "" if v is None else str(v) for k, v in tags.items()},
            service=r.get("line_item_product_code") or "",
            description=r.get("line_item_line_item_description") or usage_type,
            charge_category=kind,
            covered=kind in ("SavingsPlanCoveredUsage", "DiscountedUsage", "SavingsPlanNegation"),
        ))
    return out
