"""Subscription compute (Google Colab Pro / Pro+) as data: what a plan includes and limits.

The bundled snapshot prices a Colab GPU as an effective hourly rate (compute units drawn per hour x
the unit price; ``pricing/snapshot/data/curated_offers.csv``). The plan's limits decide how a
training run can use it:

* a session ends after at most ``session_hours`` (and earlier when idle, or without background
  execution when the browser closes), and no length is guaranteed: a run is planned in sessions of
  ``planned_session_hours`` that each checkpoint before it ends and restart from it, paying a
  restart (runtime, packages, model reload) each time;
* the plan's monthly fee buys ``units_per_month`` compute units: a month in which the runs draw
  fewer still costs the fee;
* the GPU type is not guaranteed (Colab assigns GPUs by availability), so the option says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True, slots=True)
class SubscriptionLimits:
    plan: str
    session_hours: float  # longest session the plan documents
    planned_session_hours: float  # what a plan counts on: sessions are not guaranteed to last
    units_per_month: float  # compute units the monthly fee includes
    monthly_usd: float
    background_execution: bool  # False: the session needs the browser open
    gpu_guaranteed: bool
    source: str
    as_of: date


_COLAB_FAQ = ("research.google.com/colaboratory/faq.html (VM lifetimes 'can be as much as 12 hours', vary "
              "and are not guaranteed; paid plans get longer, more lenient ones); colab.research.google.com/signup "
              "(Pro: 100 compute units a month for about $10; Pro+: 500 units for about $50 with background "
              "execution for up to 24 h)")

# Sessions are planned at half the documented length (an assumption: neither length is guaranteed,
# and a run that checkpoints every half-length loses little when a session ends early).
PLANNED_SESSION_SHARE = 0.5

# Longest prefix first, so "colab-pro-plus-" is matched before "colab-pro-".
PLANS: tuple[tuple[str, SubscriptionLimits], ...] = (
    ("colab-pro-plus-", SubscriptionLimits("Colab Pro+", 24.0, 24.0 * PLANNED_SESSION_SHARE, 500.0, 49.99, True,
                                           False, _COLAB_FAQ, date(2022, 9, 30))),
    ("colab-pro-", SubscriptionLimits("Colab Pro", 12.0, 12.0 * PLANNED_SESSION_SHARE, 100.0, 9.99, False, False,
                                      _COLAB_FAQ, date(2022, 9, 30))),
)


def subscription_of(provider: str, instance_type: str) -> SubscriptionLimits | None:
    if provider.lower() != "colab":
        return None
    for prefix, limits in PLANS:
        if instance_type.startswith(prefix):
            return limits
    return None


@dataclass(frozen=True, slots=True)
class SessionPlan:
    sessions: int
    restart_hours: float  # added to a run's hours by the restarts between sessions
    note: str


def session_plan(limits: SubscriptionLimits, train_hours: float, setup_hours: float) -> SessionPlan:
    """A run of ``train_hours`` (plus ``setup_hours`` at the start of every session) in sessions of at
    most ``limits.session_hours``: each session after the first restarts from the last checkpoint."""
    usable = max(limits.planned_session_hours - setup_hours, 1e-6)
    sessions = max(1, math.ceil(train_hours / usable - 1e-9))
    restart = (sessions - 1) * setup_hours
    parts = [f"{limits.plan}: sessions planned at {limits.planned_session_hours:g} h (up to "
             f"{limits.session_hours:g} h, not guaranteed)"]
    if sessions > 1:
        parts.append(f"the run is split into {sessions} sessions that checkpoint before the cap and restart "
                     f"from it ({restart:.2f} h of restarts counted)")
    else:
        parts.append("the run fits one session")
    if not limits.background_execution:
        parts.append("no background execution: the browser must stay open")
    if not limits.gpu_guaranteed:
        parts.append("the GPU type is not guaranteed (assigned by availability)")
    parts.append(f"the ${limits.monthly_usd:g} monthly fee includes {limits.units_per_month:g} compute units")
    return SessionPlan(sessions, restart, "; ".join(parts))


def monthly_floor_usd(limits: SubscriptionLimits, cost_usd: float) -> float:
    """What ``cost_usd`` of compute units costs under the plan: at least one month's fee."""
    return max(cost_usd, limits.monthly_usd)
