"""Rent or buy for one workload at a cadence: cost and hours per run each way, when buying pays off,
how that moves with the electricity price and with how often the job runs.

Break-even is counted in runs over the machine's life (the cash view a planner uses): buying costs
``capex - resale`` once plus energy per run, renting costs the rental per run, so

    breakeven_runs = ceil((capex - resale_at_end_of_life) / (rent_per_run - energy_per_run))

and never when a rented run costs no more than the energy of an owned one. ``breakeven_months``
is that count at ``runs_per_month``; ``within_lifetime`` says whether it comes before the machine is
expected to be sold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import datetime

from pydantic import BaseModel, Field

from optimizer import costs
from optimizer.candidates import (
    Candidate,
    CostAssumptions,
    Estimator,
    ShardingChoices,
    default_estimator,
    generate,
)
from optimizer.errors import InvalidInput
from optimizer.explain import rejected_groups, to_option
from optimizer.results import Option
from optimizer.estimator.workload import Constraints, Workload
from pricing.offer import LocalBuild, Offer

ELECTRICITY_FACTORS = (0.5, 1.0, 1.5, 2.0)
UTILIZATION_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


class RentSide(BaseModel):
    provider: str
    region: str | None
    instance_type: str
    gpu: str
    gpu_count: float
    pricing: str
    hourly_usd: float
    hours_per_run: float
    cost_per_run_usd: float
    source: str | None = None
    as_of: datetime | None = None
    option: Option


class BuySide(BaseModel):
    build: str
    name: str
    gpu: str
    gpu_count: int
    hours_per_run: float
    cost_per_run_usd: float = Field(description="energy of one run: the marginal cost once owned")
    energy_per_run_usd: float
    capex_usd: float
    resale_usd: float = Field(description="expected resale at the end of the lifetime")
    lifetime_months: int
    usd_per_kwh: float
    lead_time_days: float
    cost_per_run_at_cadence_usd: float | None = Field(
        default=None, description="(capex - resale + energy) / runs over the lifetime at the cadence"
    )
    source: str | None = None
    as_of: datetime | None = None
    option: Option


class SensitivityRow(BaseModel):
    parameter: str  # "electricity_usd_per_kwh" | "runs_per_month"
    value: float
    breakeven_runs: int | None
    breakeven_months: float | None
    within_lifetime: bool


class CumulativePoint(BaseModel):
    month: int
    rent_usd: float
    buy_usd: float = Field(description="cash spent: capex up front plus energy")
    buy_net_of_resale_usd: float = Field(description="cash spent minus what the machine would sell for then")


class BreakevenResult(BaseModel):
    rent: RentSide
    buy: BuySide
    runs_per_month: float
    horizon_months: int
    breakeven_runs: int | None
    breakeven_months: float | None
    within_lifetime: bool
    cheaper_at_horizon: str  # "rent" | "buy"
    sensitivity: list[SensitivityRow]
    cumulative: list[CumulativePoint]
    prices_as_of: dict[str, datetime] = Field(default_factory=dict)
    snapshot_id: str = ""
    notes: list[str] = Field(default_factory=list)


def breakeven_runs(capex_net_usd: float, rent_per_run_usd: float, energy_per_run_usd: float) -> int | None:
    """Runs after which owning has cost no more than renting; None if that never happens."""
    margin = rent_per_run_usd - energy_per_run_usd
    if margin <= 0:
        return None
    return max(0, math.ceil(capex_net_usd / margin - 1e-9))


def breakeven_months(runs: int | None, runs_per_month: float) -> float | None:
    return None if runs is None else runs / runs_per_month


def cumulative_costs(
    rent_per_run_usd: float,
    capex_usd: float,
    energy_per_run_usd: float,
    runs_per_month: float,
    months: int,
    *,
    price_usd: float,
    units: int,
    resale_fraction: float,
    lifetime_months: int,
) -> list[CumulativePoint]:
    out = []
    for m in range(months + 1):
        runs = runs_per_month * m
        buy = capex_usd + energy_per_run_usd * runs
        resale = costs.resale_value_usd(price_usd, resale_fraction, m, lifetime_months) * units
        out.append(
            CumulativePoint(
                month=m,
                rent_usd=round(rent_per_run_usd * runs, 2),
                buy_usd=round(buy, 2),
                buy_net_of_resale_usd=round(buy - resale, 2),
            )
        )
    return out


def _pick_rent(
    workload: Workload, target: RentLike, offers: Iterable[Offer], estimator: Estimator,
    shardings: ShardingChoices | None, assumptions: CostAssumptions,
) -> Candidate:
    pool = list(offers)
    if target.instance_type is not None:
        pool = [o for o in pool if o.instance_type == target.instance_type]
        if not pool:
            raise InvalidInput("rent.instance_type", f"no offer for instance type {target.instance_type!r}")
    constraints = Constraints(
        gpus=[target.gpu] if target.gpu else None,
        providers=[target.provider] if target.provider else None,
        regions=[target.region] if target.region else None,
        allow_spot=target.spot,
        include_local=False,
    )
    cs = generate(
        workload, constraints, pool, [], runs=1, top=50, estimator=estimator, shardings=shardings,
        assumptions=assumptions,
    )
    ranked = [c for c in cs.ranked if c.pricing == ("spot" if target.spot else "on_demand")] or cs.ranked
    if not ranked:
        why = "; ".join(f"{g.reason}: {g.count}" for g in rejected_groups(cs.rejected)) or "no offers"
        raise InvalidInput("rent", f"no rental can run this workload ({why})")
    return ranked[0]


def _pick_buy(
    workload: Workload, target: BuyLike, builds: Iterable[LocalBuild], estimator: Estimator,
    shardings: ShardingChoices | None, assumptions: CostAssumptions, usd_per_kwh: float | None,
) -> tuple[Candidate, LocalBuild]:
    pool = list(builds)
    if target.build is not None:
        pool = [b for b in pool if b.id == target.build]
        if not pool:
            raise InvalidInput("buy.build", f"unknown build {target.build!r}")
    constraints = Constraints(
        gpus=[target.gpu] if target.gpu else None, include_local=True, electricity_usd_per_kwh=usd_per_kwh,
    )
    # The user names the machine: judge it on its GPU and report host shortfalls as notes.
    single = dataclasses.replace(assumptions, max_local_units=1, strict_host=False)
    cs = generate(
        workload, constraints, [], pool, runs=1, top=50, estimator=estimator, shardings=shardings,
        assumptions=single,
    )
    if not cs.ranked:
        why = "; ".join(f"{g.reason}: {g.count}" for g in rejected_groups(cs.rejected)) or "no builds"
        raise InvalidInput("buy", f"no local build can run this workload ({why})")
    # One machine: the cheapest to buy among those that can run it.
    best = min(cs.ranked, key=lambda c: (c.capex_usd, c.hours))
    build = next(b for b in pool if b.id == best.instance_type)
    return best, build


class RentLike(BaseModel):
    gpu: str | None = None
    provider: str | None = None
    instance_type: str | None = None
    region: str | None = None
    spot: bool = False


class BuyLike(BaseModel):
    gpu: str | None = None
    build: str | None = None


def breakeven(
    workload: Workload,
    rent: RentLike | BaseModel,
    buy: BuyLike | BaseModel,
    offers: Iterable[Offer],
    builds: Iterable[LocalBuild],
    *,
    runs_per_month: float = 4,
    horizon_months: int = 36,
    electricity_usd_per_kwh: float | None = None,
    prices_as_of: Mapping[str, datetime] | None = None,
    snapshot_id: str = "",
    estimator: Estimator | None = None,
    shardings: ShardingChoices | None = None,
    assumptions: CostAssumptions | None = None,
) -> BreakevenResult:
    """Compare the cheapest matching rental with the cheapest matching build for one workload."""
    a = assumptions or CostAssumptions()
    est = estimator or default_estimator()
    rent_t = RentLike.model_validate(rent.model_dump())
    buy_t = BuyLike.model_validate(buy.model_dump())
    r = _pick_rent(workload, rent_t, offers, est, shardings, a)
    b, build = _pick_buy(workload, buy_t, builds, est, shardings, a, electricity_usd_per_kwh)
    kwh = float(b.breakdown["usd_per_kwh"])
    capex = b.capex_usd
    resale = capex - b.fixed_usd
    e = b.cost_per_run_usd
    n = breakeven_runs(capex - resale, r.cost_per_run_usd, e)
    months = breakeven_months(n, runs_per_month)
    life = build.lifetime_months
    within = months is not None and months <= life
    runs_in_life = runs_per_month * life
    sens = _sensitivity(r.cost_per_run_usd, capex - resale, e, kwh, runs_per_month, life)
    curve = cumulative_costs(
        r.cost_per_run_usd, capex, e, runs_per_month, horizon_months,
        price_usd=build.price_usd, units=b.nodes, resale_fraction=build.resale_fraction,
        lifetime_months=life,
    )
    last = curve[-1]
    notes = [
        "break-even counts capex minus the expected resale at the end of the build's "
        f"{life}-month life; the chart also shows the cash view (no resale)",
        f"electricity {kwh:.4f} USD/kWh at {a.psu_efficiency:.0%} PSU efficiency; idle power not counted",
    ]
    host = est(workload, b.gpu, build.gpu_count, None if build.gpu_count == 1 else b.sharding).host
    if build.ram_gb < host.ram_gb:
        notes.append(
            f"{build.id} has {build.ram_gb:g} GB RAM; the job wants {host.ram_gb:g} GB for loading and data "
            "caching: expect swapping while the model loads, or add RAM"
        )
    if build.cpu_cores < host.cpu_cores:
        notes.append(f"{build.id} has {build.cpu_cores} CPU cores; the data pipeline wants {host.cpu_cores}")
    if n is None:
        notes.append("a rented run costs no more than the energy of an owned one: buying never pays off")
    elif not within:
        notes.append(f"break-even comes after the build's {life}-month life at this cadence")
    return BreakevenResult(
        rent=RentSide(
            provider=r.provider, region=r.region, instance_type=r.instance_type, gpu=r.gpu,
            gpu_count=r.total_gpus, pricing=r.pricing, hourly_usd=round(r.hourly_usd, 6),
            hours_per_run=round(r.hours, 4), cost_per_run_usd=round(r.cost_per_run_usd, 4),
            source=r.source, as_of=r.as_of, option=to_option(r),
        ),
        buy=BuySide(
            build=build.id, name=build.name, gpu=b.gpu, gpu_count=build.gpu_count,
            hours_per_run=round(b.hours, 4), cost_per_run_usd=round(e, 4), energy_per_run_usd=round(e, 4),
            capex_usd=round(capex, 2), resale_usd=round(resale, 2), lifetime_months=life,
            usd_per_kwh=kwh, lead_time_days=build.lead_time_days,
            cost_per_run_at_cadence_usd=round((capex - resale) / runs_in_life + e, 4) if runs_in_life else None,
            source=build.source, as_of=build.as_of, option=to_option(b),
        ),
        runs_per_month=runs_per_month,
        horizon_months=horizon_months,
        breakeven_runs=n,
        breakeven_months=round(months, 2) if months is not None else None,
        within_lifetime=within,
        cheaper_at_horizon="buy" if last.buy_net_of_resale_usd < last.rent_usd else "rent",
        sensitivity=sens,
        cumulative=curve,
        prices_as_of=dict(prices_as_of or {}),
        snapshot_id=snapshot_id,
        notes=notes,
    )


def _sensitivity(
    rent_per_run: float, capex_net: float, energy_per_run: float, kwh: float, runs_per_month: float,
    lifetime_months: int,
) -> list[SensitivityRow]:
    rows: list[SensitivityRow] = []
    for f in ELECTRICITY_FACTORS:
        n = breakeven_runs(capex_net, rent_per_run, energy_per_run * f)
        m = breakeven_months(n, runs_per_month)
        rows.append(SensitivityRow(
            parameter="electricity_usd_per_kwh", value=round(kwh * f, 4), breakeven_runs=n,
            breakeven_months=round(m, 2) if m is not None else None,
            within_lifetime=m is not None and m <= lifetime_months,
        ))
    n = breakeven_runs(capex_net, rent_per_run, energy_per_run)
    for f in UTILIZATION_FACTORS:
        m = breakeven_months(n, runs_per_month * f)
        rows.append(SensitivityRow(
            parameter="runs_per_month", value=round(runs_per_month * f, 4), breakeven_runs=n,
            breakeven_months=round(m, 2) if m is not None else None,
            within_lifetime=m is not None and m <= lifetime_months,
        ))
    return rows
