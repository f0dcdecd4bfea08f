"""Turn candidates and a solver answer into the answer people read: best, alternatives, fastest,
why the rest were rejected, and what the solver did."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from optimizer.candidates import Candidate, CostAssumptions, RejectionTally
from optimizer.ilp.solve import SolveResult, solver_name
from optimizer.results import Option, Quote, RejectedGroup, SolverInfo


def to_option(c: Candidate) -> Option:
    return Option(
        kind=c.kind,
        provider=c.provider,
        region=c.region,
        instance_type=c.instance_type,
        gpu=c.gpu,
        gpus_per_node=c.gpus_per_node,
        nodes=c.nodes,
        pricing=c.pricing,
        hourly_usd=round(c.hourly_usd, 6),
        hours=round(c.hours, 4),
        cost_usd=round(c.cost_usd, 4),
        memory_need_gb_per_gpu=round(c.memory_need_gb_per_gpu, 3),
        vram_gb_per_gpu=c.vram_gb_per_gpu,
        sharding=c.sharding,
        cost_breakdown={k: round(v, 4) for k, v in c.breakdown.items()},
        zone=c.zone,
        source=c.source,
        as_of=c.as_of,
        outlay_usd=round(c.outlay_usd, 4),
        machines=c.machines if c.kind == "local" else None,
        utilization=round(c.utilization, 4) if c.utilization is not None else None,
        recipe=c.recipe,
        warnings=list(c.warnings),
        basis=c.basis,  # type: ignore[arg-type]  # an Estimate's basis, one of Option's
        measurement_id=c.measurement_id,
        spot_risk=c.spot.summary() if c.spot is not None else None,
    )


def rejected_groups(tally: RejectionTally) -> list[RejectedGroup]:
    """Reasons with counts, most frequent first."""
    return [
        RejectedGroup(reason=r, count=n, examples=list(tally.examples.get(r, [])))
        for r, n in sorted(tally.counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def solver_info(result: SolveResult | None) -> SolverInfo:
    """What the solver did; with no feasible candidate there was nothing to solve, and it says so."""
    if result is None:
        return SolverInfo(name=solver_name(), status="Infeasible (no feasible candidate)", seconds=0.0)
    return SolverInfo(
        name=result.solver,
        status=result.status,
        seconds=round(result.seconds, 6),
        gap=result.gap,
        time_limit_s=result.time_limit_s,
    )


def fastest(cands: Iterable[Candidate]) -> Candidate | None:
    return min(cands, key=lambda c: (c.hours, c.cost_usd, c.key), default=None)


def answer_rows(top: int) -> int:
    """Enough of the cheapest cloud rows (one per offer, zones merged) for ``ranked_options`` with
    ``top``. The rentals it shows are among the ``top`` cheapest after the chosen option's own row
    is taken out, or, when every row shown is a build, the ``max(1, top // 4)`` cheapest that give
    way to renting: ``top + 1`` rows hold both; ``max(1, top // 4)`` more are kept as a margin.
    Rows beyond are never shown, so a quote need not make them (``candidates.generate``'s ``rows``)."""
    return top + 1 + max(1, top // 4)


def ranked_options(best: Candidate | None, ranked: Sequence[Candidate], top: int) -> list[Option]:
    """The chosen candidate first, then the cheapest alternatives (one per offer or build).

    Rent or buy is the question, so when both kinds are feasible both are shown: if the cheapest
    ``top`` rows are all cloud (or all local), the last quarter of the rows (at least one) gives way
    to the cheapest of the other kind, so more than a single build (or rental) can be compared.
    """
    rows = list(ranked)
    if best is not None:
        rows = [best, *[c for c in rows if not _same_offer(c, best)]]
    shown = rows[:top]
    for kind in ("local", "cloud"):
        if len(shown) >= 2 and all(c.kind != kind for c in shown):
            others = [c for c in rows[top:] if c.kind == kind][: max(1, top // 4)]
            if others:
                shown = shown[: len(shown) - len(others)] + others
    return [to_option(c) for c in shown]


def _same_offer(a: Candidate, b: Candidate) -> bool:
    return (a.provider, a.region, a.instance_type, a.nodes, a.pricing) == (
        b.provider, b.region, b.instance_type, b.nodes, b.pricing,
    )


def build_quote(
    *,
    best: Candidate | None,
    ranked: Sequence[Candidate],
    pareto: Sequence[Candidate],
    tally: RejectionTally,
    result: SolveResult | None,
    prices_as_of: Mapping[str, datetime],
    snapshot_id: str,
    runs: int,
    top: int,
    assumptions: CostAssumptions,
    counts: Mapping[str, int],
) -> Quote:
    quick = fastest(pareto)
    # ``asdict`` copies each field deeply; these are plain numbers and flags.
    details: dict[str, Any] = {"assumptions": {f.name: getattr(assumptions, f.name) for f in fields(assumptions)},
                               **counts}
    return Quote(
        best=to_option(best) if best is not None else None,
        options=ranked_options(best, ranked, top),
        rejected=rejected_groups(tally),
        prices_as_of=dict(prices_as_of),
        snapshot_id=snapshot_id,
        solver=solver_info(result),
        fastest=to_option(quick) if quick is not None else None,
        runs=runs,
        estimate=details,
    )
