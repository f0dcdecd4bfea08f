"""Rent or buy for one workload at a cadence: cost and hours per run each way, when buying pays off,
how that moves with the electricity price and with how often the job runs.

Buying means owning as many machines as the cadence needs: each runs at most
``730 h x max_utilization`` a month, so ``machines = ceil(runs_per_month x hours_per_run /
(730 x max_utilization))``. Owning through month ``m`` costs the machines' price plus energy minus
what they would sell for then, on one resale curve (``costs.resale_curve_usd``); renting costs the
rental per run. So with ``R`` runs a month

    d(m) = rent_per_run x R x m - (capex + energy_per_run x R x m - resale(m))

and ``breakeven_months`` is the month where ``d`` turns positive (never, when a rented run costs no
more than the energy of an owned one); ``cheaper_at_horizon`` is the sign of ``d(horizon)``, so the
two figures cannot disagree. ``breakeven_runs`` is the runs done by then. ``d`` is convex (resale
decays exponentially) and starts below zero (only the GPUs resell), so it crosses once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

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
from optimizer.commitments import (
    CommitmentBreakeven,
    breakeven_utilization,
    commitment_breakeven,
    find_offer,
    with_commitments,
)
from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import canonical_gpu
from optimizer.estimator.workload import Constraints, Workload
from optimizer.explain import rejected_groups, to_option
from optimizer.offer import LocalBuild, Offer
from optimizer.price_warnings import price_screen
from optimizer.resale import resellable_share
from optimizer.results import Option

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
    capex_usd: float = Field(description="price of all the machines the cadence needs")
    resale_usd: float = Field(description="expected resale of those machines at the end of the lifetime")
    price_per_machine_usd: float = 0.0
    machines: int = Field(default=1, description="machines the cadence needs (730 h a month each, at most "
                          "max_utilization of it)")
    utilization: float = Field(default=0.0, description="share of the machines' hours the runs use")
    max_utilization: float = costs.MAX_UTILIZATION
    hours_per_month_needed: float = 0.0
    machine_hours_per_month: float = Field(default=0.0, description="machines x 730 h")
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
    payback_months_cash: float | None = Field(
        default=None, description="months until the savings repay the machines' price, selling nothing"
    )
    sensitivity: list[SensitivityRow]
    cumulative: list[CumulativePoint]
    prices_as_of: dict[str, datetime] = Field(default_factory=dict)
    snapshot_id: str = ""
    notes: list[str] = Field(default_factory=list)
    commitment: CommitmentBreakeven | None = Field(
        default=None,
        description="the rental under its cheapest term commitment (reserved, savings plan, ...): what buying "
        "is compared with besides on demand; null when the rental has none",
    )


def breakeven_runs(capex_net_usd: float, rent_per_run_usd: float, energy_per_run_usd: float) -> int | None:
    """Runs after which owning has cost no more than renting, resale fixed at ``capex - capex_net``;
    None if that never happens."""
    margin = rent_per_run_usd - energy_per_run_usd
    if margin <= 0:
        return None
    return max(0, math.ceil(capex_net_usd / margin - 1e-9))


def breakeven_months(runs: int | None, runs_per_month: float) -> float | None:
    return None if runs is None else runs / runs_per_month


@dataclasses.dataclass(frozen=True, slots=True)
class Owning:
    """``machines`` machines of one build: their price, energy per run and resale curve."""

    price_usd: float  # one machine
    machines: int
    energy_per_run_usd: float
    resale_fraction: float
    lifetime_months: int
    resellable_share: float = 1.0

    @property
    def capex_usd(self) -> float:
        return self.price_usd * self.machines

    def resale_usd(self, month: float) -> float:
        return costs.resale_curve_usd(
            self.price_usd, self.resale_fraction, month, self.lifetime_months, self.resellable_share
        ) * self.machines

    def net_usd(self, month: float, runs: float) -> float:
        """Cash spent through ``month`` minus what the machines would sell for then."""
        return self.capex_usd + self.energy_per_run_usd * runs - self.resale_usd(month)


def breakeven_month(rent_per_run_usd: float, own: Owning, runs_per_month: float) -> float | None:
    """First month at which owning (net of resale then) has cost no more than renting; None if never."""

    def d(m: float) -> float:
        return rent_per_run_usd * runs_per_month * m - own.net_usd(m, runs_per_month * m)

    if d(0.0) >= 0:
        return 0.0
    saving = (rent_per_run_usd - own.energy_per_run_usd) * runs_per_month
    if saving <= 0:
        return None
    # d(m) >= saving * m - capex, so the crossing lies before capex / saving.
    lo, hi = 0.0, own.capex_usd / saving
    for _ in range(60):
        mid = (lo + hi) / 2
        if d(mid) >= 0:
            hi = mid
        else:
            lo = mid
    return hi


def machines_for(runs_per_month: float, hours_per_run: float, units: int, max_utilization: float) -> costs.MachineSizing:
    """Machines the cadence needs, each busy at most ``max_utilization`` of its 730 h a month."""
    return costs.machines_needed(runs_per_month * hours_per_run * units, 1.0, max_utilization, units)


def cumulative_costs(
    rent_per_run_usd: float, own: Owning, runs_per_month: float, months: int
) -> list[CumulativePoint]:
    out = []
    for m in range(months + 1):
        runs = runs_per_month * m
        buy = own.capex_usd + own.energy_per_run_usd * runs
        out.append(
            CumulativePoint(
                month=m,
                rent_usd=round(rent_per_run_usd * runs, 2),
                buy_usd=round(buy, 2),
                buy_net_of_resale_usd=round(own.net_usd(m, runs), 2),
            )
        )
    return out


def _pick_rent(
    workload: Workload, target: RentLike, offers: Iterable[Offer], estimator: Estimator,
    shardings: ShardingChoices | None, assumptions: CostAssumptions,
) -> Candidate:
    pool = list(offers)
    # Prices far from their provider's level or too old are not compared against (issue 19),
    # unless the request names the instance itself.
    screen = price_screen(pool, datetime.now(UTC)) if target.instance_type is None else None
    if target.instance_type is not None:
        pool = [o for o in pool if o.instance_type == target.instance_type]
        if not pool:
            raise InvalidInput("rent.instance_type", f"no offer for instance type {target.instance_type!r}")
    if target.gpu:
        canonical_gpu(target.gpu, field="rent.gpu")  # named as the request names it, not as a constraint
    constraints = Constraints(
        gpus=[target.gpu] if target.gpu else None,
        providers=[target.provider] if target.provider else None,
        regions=[target.region] if target.region else None,
        allow_spot=target.spot,
        include_local=False,
    )
    cs = generate(
        workload, constraints, pool, [], runs=1, top=50, estimator=estimator, shardings=shardings,
        assumptions=assumptions, screen=screen,
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
    if target.gpu:
        canonical_gpu(target.gpu, field="buy.gpu")
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
    offers = list(offers)  # read twice: the rental, then its commitments
    r = _pick_rent(workload, rent_t, offers, est, shardings, a)
    b, build = _pick_buy(workload, buy_t, builds, est, shardings, a, electricity_usd_per_kwh)
    kwh = float(b.breakdown["usd_per_kwh"])
    e = b.cost_per_run_usd
    life = build.lifetime_months
    units = max(1, b.nodes)
    sizing = machines_for(runs_per_month, b.hours, units, a.max_utilization)
    own = Owning(build.price_usd, sizing.machines, e, build.resale_fraction, life, resellable_share(build))
    capex = own.capex_usd
    resale_end = own.resale_usd(life)
    months = breakeven_month(r.cost_per_run_usd, own, runs_per_month)
    n = None if months is None else max(0, math.ceil(months * runs_per_month - 1e-9))
    within = months is not None and months <= life
    runs_in_life = runs_per_month * life
    saving = (r.cost_per_run_usd - e) * runs_per_month
    sens = _sensitivity(r.cost_per_run_usd, build, b, kwh, runs_per_month, a.max_utilization)
    curve = cumulative_costs(r.cost_per_run_usd, own, runs_per_month, horizon_months)
    at_horizon = r.cost_per_run_usd * runs_per_month * horizon_months - own.net_usd(
        horizon_months, runs_per_month * horizon_months
    )
    hours_month = sizing.hours_needed
    notes = [
        f"{runs_per_month:g} runs a month x {b.hours:.2f} h = {hours_month:,.0f} machine-hours a month: "
        f"{sizing.machines} machine(s) x 730 h at most {a.max_utilization:.0%} busy "
        f"({sizing.utilization:.0%} used)",
        "break-even and the horizon comparison both count what the machines would sell for at that month "
        f"(only the GPUs resell; {build.resale_fraction:.0%} of the price after the build's {life}-month life)",
        f"electricity {kwh:.4f} USD/kWh at {a.psu_efficiency:.0%} PSU efficiency; energy per run includes "
        f"{a.idle_hours_per_run:g} h at the build's idle power between runs ({build.idle_power_w:g} W)",
    ]
    if sizing.machines > a.max_machines:
        notes.append(
            f"the cadence needs {sizing.machines} machines, more than the {a.max_machines} a local purchase "
            "is sized for here: rent, or run the job less often"
        )
    host = est(workload, b.gpu, build.gpu_count, None if build.gpu_count == 1 else b.sharding).host
    if build.ram_gb < host.ram_gb:
        notes.append(
            f"{build.id} has {build.ram_gb:g} GB RAM; the job wants {host.ram_gb:g} GB for loading and data "
            "caching: expect swapping while the model loads, or add RAM"
        )
    if build.cpu_cores < host.cpu_cores:
        notes.append(f"{build.id} has {build.cpu_cores} CPU cores; the data pipeline wants {host.cpu_cores}")
    commitment = _commitment_side(r, offers, runs_per_month, own)
    if commitment is not None:
        notes.append(
            f"committing {commitment.instances} x {r.instance_type} ({commitment.kind}, {commitment.term_months:g} "
            f"months, {commitment.payment.replace('_', ' ')}) costs {commitment.cost_per_month_usd:,.0f} USD a month "
            f"used or not; it beats on demand above {commitment.breakeven_utilization or 1:.0%} utilisation "
            f"(the cadence uses {commitment.utilization:.0%})"
        )
    if months is None:
        notes.append("a rented run costs no more than the energy of an owned one: buying never pays off")
    elif not within:
        notes.append(f"break-even comes after the build's {life}-month life at this cadence")
    return BreakevenResult(
        rent=RentSide(
            provider=r.provider, region=r.region, instance_type=r.instance_type, gpu=r.gpu,
            gpu_count=r.total_gpus, pricing=r.pricing, hourly_usd=round(r.hourly_usd, 6),
            hours_per_run=round(r.hours, 4), cost_per_run_usd=round(r.cost_per_run_usd, 4),
            source=r.source, as_of=r.as_of, option=_with_terms(to_option(r), offers),
        ),
        buy=BuySide(
            build=build.id, name=build.name, gpu=b.gpu, gpu_count=build.gpu_count,
            hours_per_run=round(b.hours, 4), cost_per_run_usd=round(e, 4), energy_per_run_usd=round(e, 4),
            capex_usd=round(capex, 2), resale_usd=round(resale_end, 2), lifetime_months=life,
            price_per_machine_usd=round(build.price_usd, 2), machines=sizing.machines,
            utilization=round(sizing.utilization, 4), max_utilization=a.max_utilization,
            hours_per_month_needed=round(hours_month, 2),
            machine_hours_per_month=round(sizing.machines * costs.HOURS_PER_MONTH, 2),
            usd_per_kwh=kwh, lead_time_days=build.lead_time_days,
            cost_per_run_at_cadence_usd=round((capex - resale_end) / runs_in_life + e, 4) if runs_in_life else None,
            source=build.source, as_of=build.as_of, option=_bought_option(b, sizing, capex, e, runs_in_life),
        ),
        runs_per_month=runs_per_month,
        horizon_months=horizon_months,
        breakeven_runs=n,
        breakeven_months=round(months, 2) if months is not None else None,
        within_lifetime=within,
        cheaper_at_horizon="buy" if at_horizon > 0 else "rent",
        payback_months_cash=round(capex / saving, 2) if saving > 0 else None,
        sensitivity=sens,
        cumulative=curve,
        prices_as_of=dict(prices_as_of or {}),
        snapshot_id=snapshot_id,
        notes=notes,
        commitment=commitment,
    )


def _with_terms(option: Option, offers: list[Offer]) -> Option:
    with_commitments([option], offers)
    return option


def _commitment_side(r: Candidate, offers: list[Offer], runs_per_month: float, own: Owning) -> CommitmentBreakeven | None:
    """The rental committed for a term: its monthly cost, and when buying overtakes it."""
    offer = find_offer(offers, r.provider, r.region, r.zone, r.instance_type)
    if offer is None or offer.price_hour is None:
        return None
    found = commitment_breakeven(offer, r.nodes, r.hours, runs_per_month)
    if found is None:
        return None
    c, n, monthly, use = found
    per_run = monthly / runs_per_month
    months = breakeven_month(per_run, own, runs_per_month)
    u_star = breakeven_utilization(c.effective_hourly_usd, offer.price_hour)
    return CommitmentBreakeven(
        kind=c.kind, term_months=c.term_months, payment=c.payment, offering_class=c.offering_class,
        effective_hourly_usd=round(c.effective_hourly_usd, 6), instances=n,
        cost_per_month_usd=round(monthly, 2), cost_per_run_usd=round(per_run, 4), utilization=round(use, 4),
        breakeven_utilization=round(u_star, 4) if u_star is not None else None,
        cheaper_than_on_demand=monthly < r.cost_per_run_usd * runs_per_month,
        breakeven_runs=None if months is None else max(0, math.ceil(months * runs_per_month - 1e-9)),
        breakeven_months=round(months, 2) if months is not None else None,
        source=c.source, as_of=c.as_of,
    )


def _bought_option(b: Candidate, sizing: costs.MachineSizing, capex: float, e: float, runs: float) -> Option:
    """The build as a quote option, with the machines the cadence needs over the build's life."""
    opt = to_option(b)
    return opt.model_copy(update={
        "machines": sizing.machines, "utilization": round(sizing.utilization, 4),
        "outlay_usd": round(capex + e * runs, 2),
    })


def _sensitivity(
    rent_per_run: float, build: LocalBuild, b: Candidate, kwh: float, runs_per_month: float, max_utilization: float,
) -> list[SensitivityRow]:
    rows: list[SensitivityRow] = []
    life = build.lifetime_months
    share = resellable_share(build)
    units = max(1, b.nodes)

    def row(parameter: str, value: float, rpm: float, energy: float) -> SensitivityRow:
        m_count = machines_for(rpm, b.hours, units, max_utilization).machines
        own = Owning(build.price_usd, m_count, energy, build.resale_fraction, life, share)
        m = breakeven_month(rent_per_run, own, rpm)
        n = None if m is None else max(0, math.ceil(m * rpm - 1e-9))
        return SensitivityRow(
            parameter=parameter, value=round(value, 4), breakeven_runs=n,
            breakeven_months=round(m, 2) if m is not None else None, within_lifetime=m is not None and m <= life,
        )

    for f in ELECTRICITY_FACTORS:
        rows.append(row("electricity_usd_per_kwh", kwh * f, runs_per_month, b.cost_per_run_usd * f))
    for f in UTILIZATION_FACTORS:
        rows.append(row("runs_per_month", runs_per_month * f, runs_per_month * f, b.cost_per_run_usd))
    return rows
