"""Team budgets in a plan: what each capped team spends each month, and why a plan cannot keep to them.

A team's monthly spend is what its runs are charged that month: rentals, and the energy of its
runs on owned machines (``optimizer.ilp.portfolio.add_team_budget_rows``). Machines and
commitments bought are capital shared by every team, capped by ``capex_budget_usd``, not by a
team's monthly budget; so a cap can move a team's runs onto bought machines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from optimizer.ilp.portfolio import PortfolioJob

if TYPE_CHECKING:
    from optimizer.plan import PlanResult


class TeamMonthSpend(BaseModel):
    team: str
    month: int
    spend_usd: float
    budget_usd: float
    within: bool


def least_spend_usd(job: PortfolioJob, month: int) -> float:
    """The least job's runs of ``month`` can be charged: each on its cheapest rental or build."""
    per_run = [r.cost_per_run_usd for r in job.rentals] + [b.energy_per_run_usd for b in job.builds]
    return min(per_run, default=0.0) * job.demand[month] if month < len(job.demand) else 0.0


def explain_team_budgets(
    result: PlanResult, jobs: Sequence[Any], pjobs: Sequence[PortfolioJob], budgets: Mapping[str, float],
    months: int,
) -> None:
    """Fill ``team_spend`` from the plan's assignments, or ``budget_notes`` when it has none."""
    team_of = {j.name: j.team for j in jobs}
    if result.total_cost_usd is not None:
        spend: dict[tuple[str, int], float] = defaultdict(float)
        for a in result.assignments:
            team = team_of.get(a.job)
            if team in budgets:
                spend[(team, a.month)] += a.cost_usd
        for team in sorted(budgets):
            if not any(t == team for t in team_of.values()):
                result.budget_notes.append(f"team {team!r} has a budget but no job names it")
                continue
            for m in range(months):
                used = round(spend.get((team, m), 0.0), 2)
                result.team_spend.append(TeamMonthSpend(
                    team=team, month=m, spend_usd=used, budget_usd=budgets[team],
                    within=used <= budgets[team] + 0.01,
                ))
        return
    for team, cap in sorted(budgets.items()):
        for m in range(months):
            least = sum(least_spend_usd(j, m) for j in pjobs if j.team == team)
            if least > cap + 1e-6:
                result.budget_notes.append(
                    f"team {team!r} cannot keep to ${cap:,.2f} in month {m}: its runs cost at least "
                    f"${least:,.2f} there even each on its cheapest option")
    if not result.budget_notes:
        result.budget_notes.append(
            "the team budgets cannot be met together with the other limits (machine hours, capex budget, quotas)")
