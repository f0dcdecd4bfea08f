"""Commitments in the team plan: which terms a job's rental can be committed on, what each costs
over the horizon, and the ``commit`` lines of the answer.

For each job, the rental the commitment would be on is the one whose committed run is cheapest
(its offer's cheapest term rate x nodes x hours), among the on-demand rentals of every offer with
terms (``plan._committable_rentals`` prices those that could be cheapest, the same with cost floors
and without). Of that offer's terms, one per term length is offered to the model (the cheapest
effective rate of that length: a standard all-upfront reserved instance usually), so the model
chooses length, start month and count, not among payment options that cost more for the same term.

A unit is one instance committed from its start month for ``term_months``; it serves 730 hours
every month of the term and is charged for all of them, used or not. A term running past the
horizon is charged in full unless the request says the commitment keeps its value after the
horizon (``commitment_value_after_horizon``: it can be resold on the RI Marketplace or used by
other work), when only the horizon's months are charged.

Capacity blocks are dated, short reservations whose offerings exist only at the time they are
asked for; the plan has no calendar to place them on, so it leaves them out (quotes show them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from optimizer.candidates import Candidate
from optimizer.commitments import offers_by_key
from optimizer.ilp.portfolio import BuildUse, PortfolioBuild, PortfolioJob
from optimizer.offer import HOURS_PER_MONTH, Commitment, Offer

COMMIT_PREFIX = "commit|"


class CommitItem(BaseModel):
    """One ``commit`` decision of a plan (CONTRACT v3 fields first)."""

    provider: str
    region: str | None
    instance_type: str
    kind: str
    term_months: float
    payment: str
    count: int
    start_month: int
    offering_class: str | None = None
    effective_hourly_usd: float = Field(description="per instance-hour of the term, used or not")
    charged_months: float = Field(description="months of the term the plan pays for (all of them, or the horizon's share)")
    cost_usd: float = Field(description="what the plan is charged for these instances")
    source: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class CommitPool:
    """A commitment the model may buy units of: the term and the rental it is on."""

    id: str
    offer: Offer
    commitment: Commitment
    rental: Candidate


def charged_months(term_months: float, start_month: int, horizon_months: int, value_after_horizon: bool) -> float:
    """Months of a term started in ``start_month`` the plan pays for."""
    if value_after_horizon:
        return min(term_months, horizon_months - start_month)
    return term_months


def cheapest_per_length(offer: Offer) -> list[Commitment]:
    """One term per length (the lowest effective rate), capacity blocks left out."""
    best: dict[float, Commitment] = {}
    for c in offer.commitments:
        if c.kind == "capacity_block" or c.term_months < 1:
            continue
        if offer.price_hour is not None and c.effective_hourly_usd >= offer.price_hour:
            continue
        cur = best.get(c.term_months)
        if cur is None or c.effective_hourly_usd < cur.effective_hourly_usd:
            best[c.term_months] = c
    return [best[t] for t in sorted(best)]


def _pool_id(rental: Candidate, c: Commitment) -> str:
    return (f"{COMMIT_PREFIX}{rental.provider}/{rental.region}/{rental.instance_type}|{c.kind}|"
            f"{c.offering_class or '-'}|{c.term_months:g}|{c.payment}")


def commitment_pools(
    ranked_by_job: Mapping[str, Sequence[Candidate]], offers: Iterable[Offer]
) -> dict[str, list[CommitPool]]:
    """Per job: the commitments its cheapest committable rental offers (see the module doc)."""
    index = offers_by_key(offers)
    out: dict[str, list[CommitPool]] = {}
    for job, ranked in ranked_by_job.items():
        best: tuple[float, Candidate, Offer] | None = None
        for cand in ranked:
            if cand.kind != "cloud" or cand.pricing != "on_demand":
                continue
            offer = index.get((cand.provider, cand.region or "", cand.zone or "", cand.instance_type))
            terms = cheapest_per_length(offer) if offer is not None else []
            if not terms or offer is None:
                continue
            per_run = min(t.effective_hourly_usd for t in terms) * cand.nodes * cand.hours
            if best is None or per_run < best[0]:
                best = (per_run, cand, offer)
        if best is not None:
            _, cand, offer = best
            out[job] = [CommitPool(_pool_id(cand, c), offer, c, cand) for c in cheapest_per_length(offer)]
    return out


def portfolio_commitments(
    pools: Mapping[str, list[CommitPool]], horizon_months: int, value_after_horizon: bool
) -> list[PortfolioBuild]:
    """The pools as the model's units: one instance each, 730 h a month for its term."""
    seen: dict[str, PortfolioBuild] = {}
    for job_pools in pools.values():
        for p in job_pools:
            if p.id in seen:
                continue
            c = p.commitment
            month_usd = c.effective_hourly_usd * HOURS_PER_MONTH
            seen[p.id] = PortfolioBuild(
                id=p.id, price_usd=0.0,
                net_cost_by_month=[month_usd * charged_months(c.term_months, m, horizon_months, value_after_horizon)
                                   for m in range(horizon_months)],
                term_months=int(round(c.term_months)), unit_hours=HOURS_PER_MONTH,
            )
    return list(seen.values())


def committed_run(rental: Candidate) -> Candidate:
    """A run on committed instances: the instances are paid by the commitment, so a run costs only
    what is billed besides them (storage)."""
    extra = float(rental.breakdown.get("storage_usd", 0.0))
    return dataclasses.replace(rental, pricing="commitment", cost_per_run_usd=extra)  # type: ignore[arg-type]


def with_commitment_uses(jobs: Sequence[PortfolioJob], pools: Mapping[str, list[CommitPool]]) -> list[PortfolioJob]:
    """Jobs whose ``builds`` also list the commitments they can run on (instance-hours per run)."""
    out = []
    for job in jobs:
        uses = [BuildUse(build=p.id, hours=p.rental.hours * p.rental.nodes,
                         energy_per_run_usd=committed_run(p.rental).cost_per_run_usd)
                for p in pools.get(job.name, [])]
        out.append(dataclasses.replace(job, builds=[*job.builds, *uses]) if uses else job)
    return out


def without_commitments(jobs: Sequence[PortfolioJob]) -> list[PortfolioJob]:
    return [dataclasses.replace(j, builds=[b for b in j.builds if not b.build.startswith(COMMIT_PREFIX)])
            for j in jobs]


def only_commitments(jobs: Sequence[PortfolioJob]) -> list[PortfolioJob]:
    return [dataclasses.replace(j, builds=[b for b in j.builds if b.build.startswith(COMMIT_PREFIX)])
            for j in jobs]


def commit_items(
    bought: Mapping[tuple[str, int], int], pools: Mapping[str, list[CommitPool]], horizon_months: int,
    value_after_horizon: bool,
) -> list[CommitItem]:
    """The answer's ``commit`` lines from units bought per (pool id, start month)."""
    by_id = {p.id: p for ps in pools.values() for p in ps}
    out = []
    for (pid, m), n in sorted(bought.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if n <= 0:
            continue
        p = by_id[pid]
        c = p.commitment
        months = charged_months(c.term_months, m, horizon_months, value_after_horizon)
        out.append(CommitItem(
            provider=p.rental.provider, region=p.rental.region, instance_type=p.rental.instance_type,
            kind=c.kind, term_months=c.term_months, payment=c.payment, count=n, start_month=m,
            offering_class=c.offering_class, effective_hourly_usd=round(c.effective_hourly_usd, 6),
            charged_months=round(months, 4),
            cost_usd=round(c.effective_hourly_usd * HOURS_PER_MONTH * months * n, 2), source=c.source,
        ))
    return out


def monthly_charges(items: Sequence[CommitItem], horizon_months: int) -> list[float]:
    """Commitment charges per month of the horizon: the effective rate for each month held, and a
    term's months past the horizon (when paid in full) in its start month, when they were committed."""
    out = [0.0] * horizon_months
    for it in items:
        month_usd = it.effective_hourly_usd * HOURS_PER_MONTH * it.count
        held = [m for m in range(it.start_month, horizon_months) if m < it.start_month + it.term_months]
        for m in held:
            out[m] += month_usd
        out[it.start_month] += month_usd * max(0.0, it.charged_months - len(held))
    return out
