"""What a training run costs: renting (billed time, setup, spot interruptions) or owning a machine.

Pure functions; units are in the names. Assumptions that are not prices (setup time, interruption
rate, PSU efficiency) are named module constants so that callers can override them per request and
the answer can show which values it used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Per-node time from "instance running" to "first training step" when a caller has no estimate of
# its own (the estimator counts setup in a run's hours, and option generation bills that once).
SETUP_HOURS = 0.1

# Spot interruptions: a planning assumption (about one reclaim per 20 instance-hours), not a
# published rate. AWS publishes only monthly buckets per instance type (Spot Instance Advisor).
SPOT_INTERRUPTIONS_PER_HOUR = 0.05
# With a checkpoint every CHECKPOINT_INTERVAL_HOURS, a reclaim loses half an interval on average,
# plus the time to get a new instance and reload the checkpoint.
CHECKPOINT_INTERVAL_HOURS = 0.5
RESTART_HOURS = 0.1

# 80 PLUS Gold: at least 90 % efficient at 50 % load, 87 % at 20 % and 100 % load (115 V internal,
# CLEAResult 80 PLUS programme table, https://www.clearesult.com/80plus/program-details, read 2026-11).
PSU_EFFICIENCY = 0.90

HOURS_PER_MONTH = 730.0  # 8760 / 12
# An owned machine is left on, idle, about this long around each run (data preparation, evaluation,
# the next run's setup): an assumption; its idle power is billed for it (CostAssumptions can change it).
IDLE_HOURS_PER_RUN = 1.0
# Share of a month an owned machine can run jobs: maintenance, updates, data preparation and the
# gaps between runs take the rest. An assumption (the same figure the portfolio plan uses).
MAX_UTILIZATION = 0.8


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class MachineSizing:
    """How many machines a workload of ``hours_needed`` machine-hours takes within a span of months."""

    machines: int
    utilization: float  # share of those machines' hours (730 a month) the work uses
    hours_needed: float
    hours_available_per_machine: float

    def __init__(
        self, machines: int, utilization: float, hours_needed: float, hours_available_per_machine: float,
    ) -> None:
        self.machines = machines
        self.utilization = utilization
        self.hours_needed = hours_needed
        self.hours_available_per_machine = hours_available_per_machine


def machines_needed(
    hours_needed: float, months: float, max_utilization: float = MAX_UTILIZATION, units_per_run: int = 1
) -> MachineSizing:
    """Machines (in whole sets of ``units_per_run``) for ``hours_needed`` machine-hours over ``months``.

    Each machine runs at most ``HOURS_PER_MONTH * max_utilization`` hours a month; ``hours_needed``
    counts every machine a run occupies (a run over two machines needs two machines' hours).
    """
    per_machine = HOURS_PER_MONTH * max_utilization * months
    sets = max(1, math.ceil(hours_needed / (per_machine * units_per_run) - 1e-9)) if per_machine > 0 else 1
    machines = sets * units_per_run
    util = hours_needed / (machines * HOURS_PER_MONTH * months) if months > 0 else 0.0
    return MachineSizing(machines, util, hours_needed, per_machine)


def billed_hours(run_hours: float, billing_increment_s: int = 1, min_billing_s: int = 0) -> float:
    """Hours the provider charges for ``run_hours`` of use: rounded up to whole increments, at least
    the minimum charge."""
    if run_hours <= 0:
        return 0.0
    seconds = run_hours * 3600.0
    increments = math.ceil(seconds / billing_increment_s - 1e-9)
    return max(increments * billing_increment_s, min_billing_s) / 3600.0


def spot_wall_hours(
    run_hours: float,
    interruptions_per_hour: float = SPOT_INTERRUPTIONS_PER_HOUR,
    checkpoint_interval_hours: float = CHECKPOINT_INTERVAL_HOURS,
    restart_hours: float = RESTART_HOURS,
) -> float:
    """Expected wall time of a spot run that checkpoints and resumes after every reclaim.

    Each reclaim costs ``restart_hours + checkpoint_interval_hours / 2``; reclaims arrive as a Poisson
    process over the wall time itself, hence the geometric form ``T / (1 - rate * loss)``.
    """
    loss_hours = restart_hours + checkpoint_interval_hours / 2.0
    slowdown = interruptions_per_hour * loss_hours
    if slowdown >= 1.0:
        return math.inf
    return run_hours / (1.0 - slowdown)


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class RentCost:
    wall_hours: float  # per run, setup and interruptions included
    billed_hours: float  # per node per run
    cost_per_run_usd: float
    compute_usd: float
    setup_usd: float
    interruption_usd: float

    def __init__(
        self, wall_hours: float, billed_hours: float, cost_per_run_usd: float, compute_usd: float, setup_usd: float,
        interruption_usd: float,
    ) -> None:
        self.wall_hours = wall_hours
        self.billed_hours = billed_hours
        self.cost_per_run_usd = cost_per_run_usd
        self.compute_usd = compute_usd
        self.setup_usd = setup_usd
        self.interruption_usd = interruption_usd

    def breakdown(self, runs: int = 1) -> dict[str, float]:
        return {
            "compute_usd": self.compute_usd * runs,
            "setup_usd": self.setup_usd * runs,
            "interruption_usd": self.interruption_usd * runs,
            "billed_hours_per_node_per_run": self.billed_hours,
        }


def rent_cost(
    hourly_usd_per_node: float,
    train_hours: float,
    nodes: int = 1,
    *,
    billing_increment_s: int = 1,
    min_billing_s: int = 0,
    spot: bool = False,
    setup_hours: float = SETUP_HOURS,
    interruptions_per_hour: float = SPOT_INTERRUPTIONS_PER_HOUR,
    spot_train_wall_hours: float | None = None,
) -> RentCost:
    """One run on ``nodes`` instances: every node is billed for setup plus training (plus the
    expected reclaim losses on spot), rounded by the provider's billing rule."""
    train_wall = spot_wall_hours(train_hours, interruptions_per_hour) if spot else train_hours
    if spot and spot_train_wall_hours is not None:
        # The offer's own expected training wall time (optimizer.spot_risk: its reclaim rate,
        # notice, checkpoint and restart), in place of the one planning rate above.
        train_wall = spot_train_wall_hours
    wall = setup_hours + train_wall
    billed = billed_hours(wall, billing_increment_s, min_billing_s)
    total = hourly_usd_per_node * billed * nodes
    # Split the bill in proportion to where the time went; rounding goes to compute.
    setup_usd = hourly_usd_per_node * setup_hours * nodes
    interruption_usd = hourly_usd_per_node * (train_wall - train_hours) * nodes
    return RentCost(
        wall_hours=wall,
        billed_hours=billed,
        cost_per_run_usd=total,
        compute_usd=total - setup_usd - interruption_usd,
        setup_usd=setup_usd,
        interruption_usd=interruption_usd,
    )


def resale_value_usd(
    price_usd: float, resale_fraction: float, age_months: float, lifetime_months: int, resellable_share: float = 1.0
) -> float:
    """Expected resale value after ``age_months``: the one resale curve (``resale_curve_usd``), so a
    quote, a plan and a break-even value the same machine at the same age alike."""
    return resale_curve_usd(price_usd, resale_fraction, age_months, lifetime_months, resellable_share)


def resale_curve_usd(
    price_usd: float, resale_fraction: float, age_months: float, lifetime_months: int, resellable_share: float = 1.0
) -> float:
    """What a machine sells for used after ``age_months``: the bundled catalog's resale model.

    Only the GPUs resell (no used-price evidence for other parts), so right after purchase the
    machine is worth its GPUs' share of the price; that value then decays exponentially (the
    launch-vs-used fit the catalog's ``resale_fraction`` comes from) to ``resale_fraction`` of the
    price at the end of ``lifetime_months``, and on at the same rate after it.
    """
    share = min(1.0, max(resellable_share, resale_fraction, 1e-9))
    end = max(resale_fraction, 1e-9)
    rate = math.log(share / end) / lifetime_months
    return price_usd * share * math.exp(-rate * max(age_months, 0.0))


def storage_usd(disk_gb: float, usd_per_gb_month: float | None, hours: float, nodes: int = 1) -> float:
    """The job's disk on each node at the provider's block-storage price for ``hours`` (the
    instance's billed hours: the disk lives as long as the instance; providers bill provisioned
    GB-months pro rata, 730 hours a month)."""
    if not usd_per_gb_month or disk_gb <= 0 or hours <= 0:
        return 0.0
    return disk_gb * usd_per_gb_month * hours / HOURS_PER_MONTH * nodes


def energy_kwh(hours: float, power_w: float, psu_efficiency: float = PSU_EFFICIENCY) -> float:
    """Energy drawn at the wall: component power divided by the PSU's efficiency."""
    return hours * power_w / psu_efficiency / 1000.0


def energy_cost_usd(
    hours: float, power_w: float, usd_per_kwh: float, psu_efficiency: float = PSU_EFFICIENCY
) -> float:
    return energy_kwh(hours, power_w, psu_efficiency) * usd_per_kwh


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class BuyCost:
    capex_usd: float
    resale_usd: float
    energy_usd: float
    idle_energy_usd: float
    energy_per_run_usd: float

    def __init__(
        self, capex_usd: float, resale_usd: float, energy_usd: float, idle_energy_usd: float, energy_per_run_usd: float,
    ) -> None:
        self.capex_usd = capex_usd
        self.resale_usd = resale_usd
        self.energy_usd = energy_usd
        self.idle_energy_usd = idle_energy_usd
        self.energy_per_run_usd = energy_per_run_usd

    @property
    def total_usd(self) -> float:
        return self.capex_usd - self.resale_usd + self.energy_usd + self.idle_energy_usd

    @property
    def outlay_usd(self) -> float:
        """Cash paid: the machines' price and the energy, before anything is sold again."""
        return self.capex_usd + self.energy_usd + self.idle_energy_usd

    def breakdown(self) -> dict[str, float]:
        return {
            "capex_usd": self.capex_usd,
            "resale_usd": -self.resale_usd,
            "energy_usd": self.energy_usd,
            "idle_energy_usd": self.idle_energy_usd,
        }


def buy_cost(
    price_usd: float,
    units: int,
    run_hours: float,
    runs: float,
    *,
    load_power_w: float,
    idle_power_w: float = 0.0,
    usd_per_kwh: float,
    resale_fraction: float,
    lifetime_months: int,
    held_months: float | None = None,
    idle_hours: float = 0.0,
    psu_efficiency: float = PSU_EFFICIENCY,
    machines: int | None = None,
    resellable_share: float = 1.0,
) -> BuyCost:
    """Owning ``machines`` machines (default ``units``) for ``runs`` runs of ``run_hours`` each on
    ``units`` of them: capex minus the expected resale after ``held_months`` (default: the whole
    lifetime) plus energy at load, plus energy for ``idle_hours`` of switched-on idling per machine."""
    held = lifetime_months if held_months is None else held_months
    owned = units if machines is None else machines
    capex = price_usd * owned
    resale = resale_value_usd(price_usd, resale_fraction, held, lifetime_months, resellable_share) * owned
    per_run = energy_cost_usd(run_hours, load_power_w, usd_per_kwh, psu_efficiency) * units
    idle = energy_cost_usd(idle_hours, idle_power_w, usd_per_kwh, psu_efficiency) * owned
    return BuyCost(
        capex_usd=capex,
        resale_usd=resale,
        energy_usd=per_run * runs,
        idle_energy_usd=idle,
        energy_per_run_usd=per_run,
    )
