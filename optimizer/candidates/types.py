"""What option generation answers: ``Candidate`` and ``CandidateSet``, the ``CostAssumptions`` it
prices with, and its limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from optimizer import costs
from optimizer.candidates.rejections import RejectionTally
from optimizer.results import Recipe
from optimizer.spot_risk import SpotPricing

Pricing = Literal["on_demand", "spot", "purchase"]

MAX_NODES = 4
MAX_TOTAL_GPUS = 64
MAX_LOCAL_UNITS = 2
MAX_MACHINES = 16  # local machines one answer may buy: beyond this it is a data centre, not a build
GIB_PER_GB = 2**30 / 1e9


@dataclass(frozen=True, slots=True)
class CostAssumptions:
    """Knobs of the cost model that are assumptions rather than prices; echoed in answers."""

    # None: the estimator's own per-run setup, counted once in the run's hours and billed once.
    setup_hours: float | None = None
    psu_efficiency: float = costs.PSU_EFFICIENCY
    electricity_usd_per_kwh: float | None = None  # None: each build's own figure
    held_months: float | None = None  # None: a build is held for its lifetime, then sold
    max_nodes: int = MAX_NODES
    max_local_units: int = MAX_LOCAL_UNITS
    # An owned machine runs at most 730 h x this a month; more runs need more machines.
    max_utilization: float = costs.MAX_UTILIZATION
    max_machines: int = MAX_MACHINES
    # False: a named machine is judged on its GPUs only; host shortfalls become notes, not rejections.
    strict_host: bool = True
    # GB leaving the cloud per run (``constraints.egress_gb``), billed at ``optimizer.egress_prices``.
    egress_gb_per_run: float = 0.0
    # An owned machine stays on (idle) this long around each run: data preparation, evaluation, the
    # next run's setup. An assumption; its energy at the build's idle power is counted.
    idle_hours_per_run: float = costs.IDLE_HOURS_PER_RUN


# Not frozen, though nothing assigns to it (changes go through ``dataclasses.replace``): a quote
# makes some fifty, and a frozen dataclass's __init__ sets each of its 31 fields through
# object.__setattr__. It was never hashable (``breakdown`` is a dict).
@dataclass(slots=True)
class Candidate:
    key: str
    kind: Literal["cloud", "local"]
    provider: str
    region: str | None
    zone: str | None
    instance_type: str
    gpu: str
    gpus_per_node: float
    nodes: int
    pricing: Pricing
    hourly_usd: float  # all nodes together; for a purchase, energy per hour at load
    hours: float  # wall hours per run
    fixed_usd: float  # paid once whatever the runs (purchase: capex - resale)
    cost_per_run_usd: float
    runs: int
    memory_need_gb_per_gpu: float
    vram_gb_per_gpu: float
    sharding: str
    breakdown: Mapping[str, float]
    source: str | None = None
    as_of: datetime | None = None
    total_gpus: float = 1.0
    lead_hours: float = 0.0
    capex_usd: float = 0.0  # purchase: the price of every machine bought
    machines: int = 0  # purchase: machines bought (nodes per run x sets the runs need)
    utilization: float | None = None  # purchase: share of the machines' hours the runs use
    recipe: Recipe | None = None
    basis: str = "model"  # the estimate's basis (optimizer.measured)
    measurement_id: str | None = None
    warnings: tuple[str, ...] = ()  # shown with the option: a tight fit, idle GPUs, a slow host ...
    spot: SpotPricing | None = None  # spot: the reclaim-risk inputs its option's spot_risk is simulated from

    @property
    def cost_usd(self) -> float:
        return self.fixed_usd + self.cost_per_run_usd * self.runs

    @property
    def outlay_usd(self) -> float:
        """Cash paid: the rental bill, or the machines' price plus energy (no resale): what a budget caps."""
        if self.kind == "local":
            return self.capex_usd + self.cost_per_run_usd * self.runs
        return self.cost_usd


@dataclass(slots=True)
class CandidateSet:
    pareto: list[Candidate]  # non-dominated in (hours, cost): what the ILP sees
    ranked: list[Candidate]  # cheapest first, one per offer (zones merged) or build; about 4 x top
    rejected: RejectionTally
    feasible_offers: int = 0
    estimates: int = 0
