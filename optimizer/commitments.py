"""What a commitment costs per hour used, and how busy an instance must be for it to pay; pure.

A commitment (reserved instance, savings plan, committed-use discount, Azure reservation,
capacity block) is paid for every hour of its term, used or not. Over a term of ``T`` hours of
which the instance is busy ``u * T``, on demand costs ``r_od * u * T`` and the commitment
``r_eff * T``, with ``r_eff = hourly + upfront / T``. So the commitment is cheaper exactly when

    u > u* = r_eff / r_od        (the break-even utilisation)

and never when ``u* >= 1``. A capacity block is the exception: it is bought for the hours the
job runs, so its break-even is "its rate is below on demand", not a share of a term.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.estimator.memo import LruMemo
from optimizer.offer import HOURS_PER_MONTH, Commitment, Offer


def effective_hourly_usd(upfront_usd: float, hourly_usd: float, term_months: float) -> float:
    """Hourly fee plus the upfront fee spread over every hour of the term (730 h a month)."""
    if term_months <= 0:
        raise ValueError("term_months must be positive")
    return hourly_usd + upfront_usd / (term_months * HOURS_PER_MONTH)


def breakeven_utilization(effective_usd: float, on_demand_usd: float) -> float | None:
    """Share of the term's hours above which the commitment costs less than on demand; None when
    it never does (its effective rate is not below on demand)."""
    if on_demand_usd <= 0 or effective_usd >= on_demand_usd:
        return None
    return effective_usd / on_demand_usd


def term_cost_usd(c: Commitment, months: float | None = None) -> float:
    """What the commitment costs for ``months`` of its term (all of it by default)."""
    return c.effective_hourly_usd * (c.term_months if months is None else months) * HOURS_PER_MONTH


class CommitmentTerm(BaseModel):
    """Which commitment an answer speaks of, and its rate."""

    model_config = ConfigDict(defer_build=True)

    kind: str
    term_months: float
    payment: str
    offering_class: str | None = None
    effective_hourly_usd: float = Field(description="per instance-hour of the term, used or not")


class CommitmentOption(CommitmentTerm):
    """One commitment of a quote or break-even option, as the answer shows it."""

    option_hourly_usd: float = Field(description="for all the option's nodes")
    saving_vs_on_demand: float = Field(description="1 - effective / on-demand rate")
    breakeven_utilization: float | None = Field(
        description="share of the term's hours the instance must be busy for this to beat on demand; "
        "null: never (for a capacity block: bought per hour used, so it pays whenever it is cheaper)"
    )
    upfront_usd: float | None = None
    starts_at: datetime | None = None
    source: str
    as_of: datetime


def commitment_options(offer: Offer, nodes: int = 1) -> list[CommitmentOption]:
    """The offer's commitments that are cheaper per hour than its on-demand price, cheapest first.
    Without an on-demand price there is nothing to compare with, so none are shown."""
    od = offer.price_hour
    if od is None:
        return []
    out = []
    for c in offer.commitments:
        if c.effective_hourly_usd >= od:
            continue
        per_term = c.kind != "capacity_block"
        out.append(CommitmentOption(
            kind=c.kind, term_months=round(c.term_months, 6), payment=c.payment, offering_class=c.offering_class,
            effective_hourly_usd=round(c.effective_hourly_usd, 6),
            option_hourly_usd=round(c.effective_hourly_usd * nodes, 6),
            saving_vs_on_demand=round(1 - c.effective_hourly_usd / od, 4),
            breakeven_utilization=round(breakeven_utilization(c.effective_hourly_usd, od) or 0, 4)
            if per_term else None,
            upfront_usd=c.upfront_usd, starts_at=c.starts_at, source=c.source, as_of=c.as_of,
        ))
    out.sort(key=lambda x: (x.effective_hourly_usd, x.term_months, x.payment))
    return out


def cheapest_term_commitment(offer: Offer) -> Commitment | None:
    """The commitment with the lowest effective rate that is a term (not a dated capacity block)."""
    terms = [c for c in offer.commitments if c.kind != "capacity_block"]
    return min(terms, key=lambda c: (c.effective_hourly_usd, c.term_months), default=None)


def _offer_key(provider: str, region: str | None, zone: str | None, instance_type: str) -> tuple[str, str, str, str]:
    return (provider, region or "", zone or "", instance_type)


# The index of one shared offer list, kept per list object (``offer_groups.kept_per_list``): a quote
# shows a dozen options but its list holds thousands of offers, and walking them all took 1.6 % of
# a quote for a new token count.
_INDEXES: LruMemo[int, tuple[list[Offer], dict[tuple[str, str, str, str], Offer]]] = LruMemo(64)


def offers_by_key(offers: Iterable[Offer]) -> dict[tuple[str, str, str, str], Offer]:
    """The offers with commitments, by (provider, region, zone, instance type). The index of an
    ``OfferList`` is shared by every caller: read it, never change it."""
    from optimizer.candidates.offer_groups import kept_per_list

    def index() -> dict[tuple[str, str, str, str], Offer]:
        return {_offer_key(o.provider, o.region, o.zone, o.instance_type): o for o in offers if o.commitments}

    return kept_per_list(_INDEXES, offers, index)


def with_commitments(options: Sequence[Any], offers: Iterable[Offer]) -> None:
    """Fill each cloud option's ``commitments`` from its offer (in place)."""
    index = offers_by_key(offers)
    if not index:
        return
    for o in options:
        if o is None or o.kind != "cloud":
            continue
        offer = index.get(_offer_key(o.provider, o.region, o.zone, o.instance_type))
        if offer is not None:
            o.commitments = commitment_options(offer, o.nodes)


class CommitmentBreakeven(CommitmentTerm):
    """Renting under the rental's cheapest term commitment, next to renting on demand and buying."""

    instances: int = Field(description="instances committed: the rental's nodes x enough to cover the monthly hours")
    cost_per_month_usd: float = Field(description="paid every month of the term, whatever runs")
    cost_per_run_usd: float = Field(description="cost_per_month_usd / runs_per_month")
    utilization: float = Field(description="share of the committed hours the cadence uses")
    breakeven_utilization: float | None = Field(description="utilisation above which it beats on demand")
    cheaper_than_on_demand: bool
    breakeven_runs: int | None = Field(description="runs after which buying has cost no more than committing")
    breakeven_months: float | None
    source: str
    as_of: datetime


def committed_instances(hours_per_month_per_node: float, nodes: int) -> int:
    """Instances to commit so the cadence's hours fit in their 730 h a month each."""
    per_node = max(1, -(-hours_per_month_per_node // HOURS_PER_MONTH))  # ceil
    return int(per_node) * max(1, nodes)


def commitment_breakeven(
    offer: Offer, nodes: int, hours_per_run: float, runs_per_month: float
) -> tuple[Commitment, int, float, float] | None:
    """(cheapest term commitment, instances, cost a month, utilisation) for renting ``offer``
    under a commitment at the cadence; None when it has none or no on-demand price to compare."""
    c = cheapest_term_commitment(offer)
    if c is None or offer.price_hour is None or runs_per_month <= 0:
        return None
    hours = hours_per_run * runs_per_month
    n = committed_instances(hours, nodes)
    monthly = n * HOURS_PER_MONTH * c.effective_hourly_usd
    utilization = hours * max(1, nodes) / (n * HOURS_PER_MONTH)
    return c, n, monthly, utilization


def find_offer(offers: Iterable[Offer], provider: str, region: str | None, zone: str | None,
               instance_type: str) -> Offer | None:
    return offers_by_key(offers).get(_offer_key(provider, region, zone, instance_type))
