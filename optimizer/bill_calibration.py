"""Learn from reconciled runs how far quotes were off, per provider and GPU, and correct later quotes.

For the n reconciled runs of one (provider, GPU), with x_i = billed hours / quoted hours (or billed
rate / quoted rate), each clipped to [CLIP_LOW, CLIP_HIGH] so one run left on for a week does not
rule every later quote::

    factor = 1 + n / (n + PRIOR_RUNS) * (mean(x_i) - 1)

i.e. the mean ratio shrunk toward 1 as if PRIOR_RUNS more runs had gone exactly as quoted. With
PRIOR_RUNS = 2: one run 20 % long gives 1.0667, three give 1.12, twenty give 1.1818.

Provisional runs (a bill line still inside the billing lag), local runs and runs with no billed
compute hours teach nothing and are left out. A corrected candidate has hours x hours_factor, the
hourly rate x rate_factor and the cost per run x both (storage follows the billed hours). Pure.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from optimizer.candidates import Candidate, CandidateSet, pareto
from optimizer.results import Option, Quote
from optimizer.runs import CalibrationFactor, RunBill

PRIOR_RUNS = 2.0
CLIP_LOW, CLIP_HIGH = 0.25, 4.0
FORMULA = f"1 + n/(n+{PRIOR_RUNS:g}) * (mean(billed/quoted) - 1), ratios clipped to [{CLIP_LOW:g}, {CLIP_HIGH:g}]"

Factors = Mapping[tuple[str, str], CalibrationFactor]


def _shrunk(ratios: Sequence[float]) -> float:
    n = len(ratios)
    clipped = [min(CLIP_HIGH, max(CLIP_LOW, x)) for x in ratios]
    mean = sum(clipped) / n
    return 1.0 + n / (n + PRIOR_RUNS) * (mean - 1.0)


def learn(bills: Iterable[RunBill]) -> list[CalibrationFactor]:
    """Hours and rate factors per (provider, GPU) from reconciled runs."""
    groups: dict[tuple[str, str], list[RunBill]] = defaultdict(list)
    for b in bills:
        if b.provisional or b.provider == "local" or b.billed_hours <= 0 or b.quoted_hours <= 0:
            continue
        groups[(b.provider, b.gpu)].append(b)
    out = []
    for (provider, gpu), rows in sorted(groups.items()):
        rows.sort(key=lambda b: b.run_id)
        hours = [b.billed_hours / b.quoted_hours for b in rows]
        rates = [b.billed_rate_usd / b.quoted_rate_usd for b in rows
                 if b.billed_rate_usd is not None and b.quoted_rate_usd > 0]
        out.append(CalibrationFactor(
            provider=provider, gpu=gpu, hours_factor=round(_shrunk(hours), 4),
            rate_factor=round(_shrunk(rates), 4) if rates else 1.0,
            runs=[b.run_id for b in rows], formula=FORMULA,
        ))
    return out


def by_key(factors: Iterable[CalibrationFactor]) -> dict[tuple[str, str], CalibrationFactor]:
    return {(f.provider, f.gpu): f for f in factors}


def _corrected(c: Candidate, f: CalibrationFactor) -> Candidate:
    both = f.hours_factor * f.rate_factor
    return dataclasses.replace(
        c, hours=c.hours * f.hours_factor, hourly_usd=c.hourly_usd * f.rate_factor,
        cost_per_run_usd=c.cost_per_run_usd * both,
        breakdown={k: v * (f.hours_factor if "hours" in k else both) for k, v in c.breakdown.items()},
    )


def calibrate_candidates(cs: CandidateSet, factors: Factors) -> CandidateSet:
    """The candidate set with every cloud candidate of a learnt (provider, GPU) corrected; the
    Pareto set is taken again, since corrected candidates may now be dominated."""
    if not factors:
        return cs

    def fix(c: Candidate) -> Candidate:
        f = factors.get((c.provider, c.gpu)) if c.kind == "cloud" else None
        return _corrected(c, f) if f is not None else c

    ranked = sorted((fix(c) for c in cs.ranked), key=lambda c: (c.cost_usd, c.hours, c.key))
    return dataclasses.replace(cs, pareto=pareto(fix(c) for c in cs.pareto), ranked=ranked)


def annotate(q: Quote, factors: Factors) -> Quote:
    """``calibration`` on every corrected option: the factors and the runs they came from."""
    if not factors:
        return q
    shown: list[Option] = [o for o in (q.best, q.fastest, *q.options) if o is not None]
    for o in shown:
        f = factors.get((o.provider, o.gpu)) if o.kind == "cloud" else None
        if f is not None:
            o.calibration = {"hours_factor": f.hours_factor, "rate_factor": f.rate_factor,
                             "runs": list(f.runs), "formula": f.formula}
    return q
