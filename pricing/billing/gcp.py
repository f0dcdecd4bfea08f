"""Google Cloud billing export (the BigQuery table, exported or queried to CSV or Parquet).

Nested fields may come flattened with dots or underscores (``service.description`` or
``service_description``). ``cost`` is what the row adds to the bill before credits (billed);
``cost`` plus the row's ``credits`` amounts (committed-use and sustained-use discounts, promotions)
is the effective cost. Rows in another currency carry ``currency_conversion_rate`` (units of that
currency per USD), which converts them. GPU SKUs ("Nvidia ... GPU running in ...") count usage in
GPU-seconds; their hours are read as GPU-hours and turned into instance-hours per run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal

from optimizer.runs import BillLine, Category
from pricing.billing.table import BillFileError, decimal_at, json_at, quantity_at, require, time_at, usd_converter

REQUIRED = ("cost", "currency", "usage_start_time", "usage_end_time", "service_description", "sku_description")
COLUMNS = frozenset((*REQUIRED, "credits", "usage_amount", "usage_unit", "currency_conversion_rate",
                     "resource_global_name", "resource_name", "labels", "cost_type"))
SECONDS = {"seconds": 1 / 3600, "second": 1 / 3600, "s": 1 / 3600, "hour": 1.0, "hours": 1.0, "h": 1.0}


def flat(row: Mapping[str, str | None]) -> dict[str, str | None]:
    return {k.replace(".", "_"): v for k, v in row.items()}


def labels_of(value: object, n: int) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        try:
            return {str(x["key"]): "" if x.get("value") is None else str(x["value"]) for x in value}
        except (TypeError, KeyError, AttributeError):
            pass
    raise BillFileError("labels", f"row {n}: labels must be a list of {{key, value}} or an object")


def credits_of(value: object, n: int) -> Decimal:
    if value is None:
        return Decimal(0)
    if not isinstance(value, list):
        raise BillFileError("credits", f"row {n}: credits must be a list of {{name, amount}}")
    total = Decimal(0)
    for c in value:
        try:
            total += Decimal(str(c["amount"]))
        except (TypeError, KeyError, ArithmeticError):
            raise BillFileError("credits", f"row {n}: a credit without a numeric amount") from None
    return total


def category_of(service: str, sku: str) -> Category:
    s, k = service.lower(), sku.lower()
    if "egress" in k or "internet" in k and "network" in k:
        return "egress"
    if "cloud storage" in s or "pd capacity" in k or "storage pd" in k or "persistent disk" in k or "snapshot" in k:
        return "storage"
    if "compute engine" in s and ("gpu" in k or "core" in k or "ram" in k or "instance" in k):
        return "compute"
    return "other"


def read_gcp(rows: Sequence[Mapping[str, str | None]], rates: Mapping[str, float] | None = None) -> list[BillLine]:
    rows = [flat(r) for r in rows]
    require(rows[0].keys() if rows else (), REQUIRED, "GCP billing export")
    currencies = Counter((r.get("currency") or "").upper() for r in rows)
    has_rate = "currency_conversion_rate" in (rows[0] if rows else {})
    convert = None if has_rate else usd_converter(currencies, "currency", rates)
    out = []
    for n, r in enumerate(rows, 2):
        cur = (r.get("currency") or "").upper()
        cost = decimal_at(r, "cost", n)
        effective = cost + credits_of(json_at(r, "credits", n), n)
        if convert is not None:
            cost, effective = convert(cur, cost), convert(cur, effective)
        elif cur != "USD":
            rate = decimal_at(r, "currency_conversion_rate", n)
            if rate <= 0:
                raise BillFileError("currency_conversion_rate", f"row {n}: must be positive")
            cost, effective = cost / rate, effective / rate
        service, sku = r.get("service_description") or "", r.get("sku_description") or ""
        category = category_of(service, sku)
        amount = quantity_at(r, "usage_amount", n)
        unit = (r.get("usage_unit") or "").lower()
        gpu_hours = amount * SECONDS[unit] if category == "compute" and "gpu" in sku.lower() and unit in SECONDS else 0.0
        start, end = time_at(r, "usage_start_time", n), time_at(r, "usage_end_time", n)
        if end < start:
            raise BillFileError("usage_end_time", f"row {n}: before usage_start_time")
        out.append(BillLine(
            row=n, billed_usd=cost, effective_usd=effective, start=start, end=end, provider="gcp",
            category=category, hours=gpu_hours, hours_per="gpu",
            resource_id=r.get("resource_global_name") or r.get("resource_name"),
            tags=labels_of(json_at(r, "labels", n), n), service=service, description=sku,
            charge_category=r.get("cost_type") or "regular",
            covered=effective != cost,
        ))
    return out
