"""The single-job model: pick one candidate.

Sets and data (names as in the code)::

    I            candidates (after Pareto pruning), indexed i
    C[i]         cost of the requested runs on i, USD
    T[i]         wall hours of one run on i (plus the purchase lead time for a build)
    G[i]         GPUs i occupies;  P(i) its provider
    D, B         deadline (hours) and budget (USD), when given
    Q[p]         GPU quota of provider p, when given

Variables: ``x[i] in {0, 1}`` (1: run the job on i).

    minimise    sum_i C[i] x[i]
    subject to  choose_one:   sum_i x[i] = 1
                deadline:     sum_i T[i] x[i] <= D
                budget:       sum_i C[i] x[i] <= B
                quota_p:      sum_{i: P(i) = p} G[i] x[i] <= Q[p]     for each p in Q

With one choice the side constraints could be checked per row, and ``candidates`` already rejects
the rows that break them (to report why); they are kept in the model so that its answer is right
on its own, whatever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulp

from optimizer.candidates import Candidate


@dataclass(frozen=True, slots=True)
class SingleModel:
    problem: pulp.LpProblem
    x: dict[str, pulp.LpVariable]  # variable name -> variable, in candidate order
    candidates: Sequence[Candidate]

    def picked(self, values: Mapping[str, float]) -> Candidate | None:
        for name, cand in zip(self.x, self.candidates, strict=True):
            if values.get(name, 0.0) > 0.5:
                return cand
        return None


def build_single(
    candidates: Sequence[Candidate],
    *,
    deadline_hours: float | None = None,
    budget_usd: float | None = None,
    quotas: Mapping[str, int] | None = None,
) -> SingleModel:
    problem = pulp.LpProblem("single_job", pulp.LpMinimize)
    x = {f"x_{i}": problem.add_variable(f"x_{i}", cat=pulp.LpBinary) for i in range(len(candidates))}
    xs = list(x.values())
    C = [c.cost_usd for c in candidates]
    T = [c.hours + c.lead_hours for c in candidates]
    G = [c.total_gpus for c in candidates]
    # Sums built from (variable, coefficient) pairs: the same expressions as ``lpSum`` of
    # products, without an expression object per term (every quote builds this model).
    problem += _sum(xs, C), "total_cost_usd"
    problem += pulp.LpConstraint(_sum(xs, [1] * len(xs)), pulp.LpConstraintEQ, rhs=1), "choose_one"
    if deadline_hours is not None:
        problem += pulp.LpConstraint(_sum(xs, T), pulp.LpConstraintLE, rhs=deadline_hours), "deadline"
    if budget_usd is not None:
        problem += pulp.LpConstraint(_sum(xs, C), pulp.LpConstraintLE, rhs=budget_usd), "budget"
    for p, q in (quotas or {}).items():
        members = [i for i, c in enumerate(candidates) if c.provider == p]
        if members:
            problem += pulp.LpConstraint(
                _sum([xs[i] for i in members], [G[i] for i in members]), pulp.LpConstraintLE, rhs=q,
            ), f"quota_{_safe(p)}"
    return SingleModel(problem=problem, x=x, candidates=list(candidates))


def _sum(xs: Sequence[pulp.LpVariable], coefficients: Sequence[float]) -> pulp.LpAffineExpression:
    return pulp.LpAffineExpression(list(zip(xs, coefficients, strict=True)))


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)
