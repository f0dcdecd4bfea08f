"""One resale valuation for every decision (quote, plan, break-even, recommend).

A bought machine is worth, after ``age`` months, what ``costs.resale_curve_usd`` says: its GPUs'
share of the price right after purchase (no used-price evidence for other parts), decaying to the
build's ``resale_fraction`` at the end of its life. Each decision values the machines at the month
it sells them: a quote at the end of the build's life (or ``held_months``), a plan at the end of its
horizon, break-even at each month it compares.
"""

from __future__ import annotations

from optimizer import costs
from optimizer.offer import LocalBuild


def resellable_share(build: LocalBuild) -> float:
    """Share of a build's price that resells: its GPUs (no used-price evidence for other parts)."""
    gpus = sum(p.price_usd for p in build.parts if p.category == "gpu")
    return gpus / build.price_usd if gpus > 0 else 1.0


def build_resale_usd(build: LocalBuild, age_months: float) -> float:
    """What one machine of ``build`` sells for after ``age_months``."""
    return costs.resale_curve_usd(
        build.price_usd, build.resale_fraction, age_months, build.lifetime_months, resellable_share(build)
    )
