"""FOCUS 1.0 - 1.2 bills (the FinOps Open Cost and Usage Specification), CSV or Parquet.

Column names as in the spec (FOCUS_Spec ``specification/columns/*.md`` at tags v1.0, v1.1, v1.2;
CC BY 4.0). ``BilledCost`` is what was invoiced; ``EffectiveCost`` is the amortised cost, which
for commitment-covered usage (a Savings Plan, a reservation) is the commitment's share while
``BilledCost`` is 0. FOCUS 1.3 renames ``ProviderName`` to ``ServiceProviderName``; both are read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from optimizer.runs import BillLine, Category
from pricing.billing.table import (
    BillFileError,
    decimal_at,
    json_at,
    quantity_at,
    require,
    time_at,
    usd_converter,
)

# Mandatory in FOCUS 1.0 and read here (the rest of the spec's columns are allowed and ignored).
REQUIRED = ("BilledCost", "EffectiveCost", "BillingCurrency", "ChargePeriodStart", "ChargePeriodEnd",
            "ChargeCategory", "ServiceCategory")
COLUMNS = frozenset((*REQUIRED, "ProviderName", "ServiceProviderName", "ConsumedQuantity", "ConsumedUnit",
                     "PricingQuantity", "PricingUnit", "ServiceSubcategory", "ChargeDescription", "SkuMeter",
                     "ResourceId", "Tags", "ServiceName", "CommitmentDiscountId", "PricingCategory"))
HOUR_UNITS = frozenset({"hours", "hour", "hrs", "hr", "h", "instance-hours", "instance hours"})
EGRESS_WORDS = ("transfer", "egress", "outbound", "internet out", "-out-")

PROVIDERS = {
    "aws": "aws", "amazon web services": "aws", "amazon": "aws", "google cloud": "gcp", "google": "gcp",
    "gcp": "gcp", "microsoft": "azure", "azure": "azure", "microsoft azure": "azure", "oracle": "oci",
    "oracle cloud infrastructure": "oci", "lambda": "lambda", "coreweave": "coreweave",
}


def provider_id(name: str | None) -> str:
    if not name:
        return "unknown"
    return PROVIDERS.get(name.strip().lower(), name.strip().lower().replace(" ", "-"))


def tags_of(value: object, col: str, n: int) -> dict[str, str]:
    """FOCUS ``Tags``: a JSON object of string keys (values may be null for key-only tags)."""
    if value is None:
        return {}
    if isinstance(value, list):  # a list of {"key", "value"} (GCP labels style)
        try:
            return {str(x["key"]): str(x.get("value") or "") for x in value}
        except (TypeError, KeyError):
            raise BillFileError(col, f"row {n}: tags must be an object or a list of key/value pairs") from None
    if not isinstance(value, dict):
        raise BillFileError(col, f"row {n}: tags must be a JSON object")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def category_of(service_category: str, unit: str, text: str) -> Category:
    low = text.lower()
    if service_category == "Storage":
        return "storage"
    if service_category == "Networking" and any(w in low for w in EGRESS_WORDS):
        return "egress"
    if service_category == "Compute" and unit.lower() in HOUR_UNITS:
        return "compute"
    return "other"


def read_focus(rows: Sequence[Mapping[str, str | None]], rates: Mapping[str, float] | None = None) -> list[BillLine]:
    columns = rows[0].keys() if rows else ()
    require(columns, REQUIRED, "FOCUS")
    provider_col = "ProviderName" if "ProviderName" in columns else "ServiceProviderName"
    require(columns, (provider_col,), "FOCUS")
    currencies = Counter((r.get("BillingCurrency") or "").upper() for r in rows)
    if "" in currencies:
        n = next(i for i, r in enumerate(rows, 2) if not r.get("BillingCurrency"))
        raise BillFileError("BillingCurrency", f"row {n}: empty")
    usd = usd_converter(currencies, "BillingCurrency", rates)
    out = []
    for n, r in enumerate(rows, 2):  # row numbers as a spreadsheet shows them (header is row 1)
        cur = (r.get("BillingCurrency") or "").upper()
        quantity = quantity_at(r, "ConsumedQuantity", n)
        pricing_qty = quantity_at(r, "PricingQuantity", n)
        unit = r.get("ConsumedUnit") or ""
        if not unit and (r.get("PricingUnit") or "").lower() in HOUR_UNITS:
            unit, quantity = r.get("PricingUnit") or "", pricing_qty
        service_cat = r.get("ServiceCategory") or ""
        words = " ".join(filter(None, (r.get("ServiceSubcategory"), r.get("ChargeDescription"), r.get("SkuMeter"))))
        category = category_of(service_cat, unit, words)
        start, end = time_at(r, "ChargePeriodStart", n), time_at(r, "ChargePeriodEnd", n)
        if end < start:
            raise BillFileError("ChargePeriodEnd", f"row {n}: before ChargePeriodStart")
        out.append(BillLine(
            row=n,
            billed_usd=usd(cur, decimal_at(r, "BilledCost", n)),
            effective_usd=usd(cur, decimal_at(r, "EffectiveCost", n)),
            start=start, end=end,
            provider=provider_id(r.get(provider_col)),
            category=category,
            hours=quantity if category == "compute" else 0.0,
            resource_id=r.get("ResourceId"),
            tags=tags_of(json_at(r, "Tags", n), "Tags", n),
            service=r.get("ServiceName") or service_cat,
            description=r.get("ChargeDescription") or "",
            charge_category=r.get("ChargeCategory") or "",
            covered=bool(r.get("CommitmentDiscountId")) or r.get("PricingCategory") == "Committed",
        ))
    return out

