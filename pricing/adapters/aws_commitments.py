"""AWS commitment prices: Reserved Instance terms, Savings Plans rates, Capacity Blocks for ML.

Three APIs, each parsed by one pure function into ``Commitment`` rows (USD per instance-hour):

- Price List ``get_products`` items carry ``terms.Reserved`` beside ``terms.OnDemand``: per term
  an ``Hrs`` dimension (the hourly fee) and, for Partial / All Upfront, a ``Quantity`` dimension
  "Upfront Fee". Effective rate = hourly + upfront / (years x 8,760 h), the figure AWS's own
  calculator and ec2instances.info show (AWS Price List API docs, "Reserved" term attributes
  LeaseContractLength, OfferingClass, PurchaseOption).
- ``savingsplans.describe_savings_plans_offering_rates``: the discounted rate of one instance
  type under a Compute or EC2 Instance Savings Plan; the plan's commitment is spent at that rate,
  so it is the effective instance-hour rate whatever the payment option.
- ``ec2.describe_capacity_block_offerings``: a dated block of N instances for D hours for one
  ``UpfrontFee``; the effective rate is the fee / (N x D).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from optimizer.offer import HOURS_PER_MONTH, Commitment

logger = logging.getLogger(__name__)

_PAYMENT = {"No Upfront": "no_upfront", "Partial Upfront": "partial_upfront", "All Upfront": "all_upfront"}
_TERM_MONTHS = {"1yr": 12, "3yr": 36, "1 yr": 12, "3 yr": 36}

RESERVED_SOURCE = "aws:pricing.get_products terms.Reserved"
SAVINGS_PLAN_SOURCE = "aws:savingsplans.describe_savings_plans_offering_rates"
CAPACITY_BLOCK_SOURCE = "aws:ec2.describe_capacity_block_offerings"


def _usd(dim: dict[str, Any]) -> float | None:
    try:
        value = float(dim.get("pricePerUnit", {}).get("USD"))
    except (TypeError, ValueError, AttributeError):
        return None
    return value if value >= 0 else None


def _parse_date(text: Any, fallback: datetime) -> datetime:
    try:
        stamp = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return fallback
    return stamp if stamp.tzinfo else fallback


def reserved_terms(item: dict[str, Any], as_of: datetime) -> list[Commitment]:
    """Every Reserved term of one Price List item (standard and convertible, 1 and 3 years,
    three payment options: twelve for most GPU types); pure. A term with a missing or
    unreadable part is skipped, not guessed."""
    out: list[Commitment] = []
    for term in (item.get("terms", {}).get("Reserved") or {}).values():
        if not isinstance(term, dict):
            continue
        attrs = term.get("termAttributes") or {}
        months = _TERM_MONTHS.get(str(attrs.get("LeaseContractLength", "")))
        payment = _PAYMENT.get(str(attrs.get("PurchaseOption", "")))
        if months is None or payment is None:
            continue
        hourly = upfront = None
        for dim in (term.get("priceDimensions") or {}).values():
            unit = dim.get("unit")
            if unit == "Hrs":
                hourly = _usd(dim)
            elif unit == "Quantity":
                upfront = _usd(dim)
        if hourly is None:
            continue
        upfront = upfront or 0.0
        if payment != "no_upfront" and upfront <= 0:
            continue  # an upfront term without its fee would look far too cheap
        effective = hourly + upfront / (months * HOURS_PER_MONTH)
        if effective <= 0:
            continue
        out.append(
            Commitment(
                kind="reserved",
                term_months=months,
                payment=payment,  # type: ignore[arg-type]
                upfront_usd=upfront,
                hourly_usd=hourly,
                effective_hourly_usd=round(effective, 6),
                offering_class=str(attrs.get("OfferingClass", "")).lower() or None,
                source=RESERVED_SOURCE,
                as_of=_parse_date(term.get("effectiveDate"), as_of),
            )
        )
    out.sort(key=lambda c: (c.term_months, c.offering_class or "", c.payment))
    return out


def _properties(result: dict[str, Any]) -> dict[str, str]:
    return {str(p.get("name")): str(p.get("value")) for p in result.get("properties") or []}


def savings_plan_rates(
    results: Iterable[dict[str, Any]], as_of: datetime
) -> dict[tuple[str, str], list[Commitment]]:
    """``{(instance_type, region): [Commitment]}`` from offering-rate search results; pure.

    Only Linux shared-tenancy ``RunInstances`` rates in USD per hour are kept (the others price
    another product)."""
    out: dict[tuple[str, str], list[Commitment]] = {}
    for result in results:
        offering = result.get("savingsPlanOffering") or {}
        props = _properties(result)
        itype, region = props.get("instanceType"), props.get("region")
        payment = _PAYMENT.get(str(offering.get("paymentOption", "")))
        if (not itype or not region or payment is None or result.get("unit") != "Hrs"
                or result.get("operation", "RunInstances") != "RunInstances"
                or offering.get("currency", "USD") != "USD"
                or props.get("tenancy", "shared").lower() != "shared"
                or props.get("productDescription", "Linux/UNIX") != "Linux/UNIX"):
            continue
        try:
            rate = float(result.get("rate"))
            seconds = float(offering.get("durationSeconds"))
        except (TypeError, ValueError):
            continue
        if rate <= 0 or seconds <= 0:
            continue
        months = round(seconds / (365 * 86400) * 12)  # 31536000 s = 1 year
        term_hours = months * HOURS_PER_MONTH
        # The plan pays its hourly commitment at this rate; upfront prepays part or all of it.
        upfront = {"no_upfront": 0.0, "all_upfront": rate * term_hours}.get(payment)
        hourly = {"no_upfront": rate, "all_upfront": 0.0}.get(payment)
        out.setdefault((itype, region), []).append(
            Commitment(
                kind="savings_plan",
                term_months=months,
                payment=payment,  # type: ignore[arg-type]
                upfront_usd=None if upfront is None else round(upfront, 2),
                hourly_usd=hourly,
                effective_hourly_usd=rate,
                offering_class=str(offering.get("planType") or "") or None,
                source=f"{SAVINGS_PLAN_SOURCE} offering {offering.get('offeringId', '?')}",
                as_of=as_of,
            )
        )
    return out


def capacity_blocks(
    offerings: Iterable[dict[str, Any]], as_of: datetime
) -> dict[tuple[str, str], list[Commitment]]:
    """``{(instance_type, availability_zone): [Commitment]}`` from Capacity Block offerings; pure.
    Each is a dated reservation paid in full up front."""
    out: dict[tuple[str, str], list[Commitment]] = {}
    for off in offerings:
        try:
            fee = float(off["UpfrontFee"])
            count = int(off.get("InstanceCount") or 1)
            hours = float(off["CapacityBlockDurationHours"])
        except (KeyError, TypeError, ValueError):
            continue
        if off.get("CurrencyCode", "USD") != "USD" or fee <= 0 or count <= 0 or hours <= 0:
            continue
        start = off.get("StartDate")
        starts_at = start if isinstance(start, datetime) else _parse_date(start, as_of) if start else None
        out.setdefault((str(off.get("InstanceType")), str(off.get("AvailabilityZone"))), []).append(
            Commitment(
                kind="capacity_block",
                term_months=hours / HOURS_PER_MONTH,
                payment="all_upfront",
                upfront_usd=round(fee / count, 2),
                hourly_usd=0.0,
                effective_hourly_usd=round(fee / (count * hours), 6),
                starts_at=starts_at,
                source=f"{CAPACITY_BLOCK_SOURCE} {off.get('CapacityBlockOfferingId', '?')}",
                as_of=as_of,
            )
        )
    return out
