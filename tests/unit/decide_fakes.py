"""Fakes for the decision-engine tests: a table-driven estimator and small hand-made catalogs.

All prices built here are synthetic test values (``source="test: synthetic"``), chosen to exercise
the logic; they make no claim about any provider's real prices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from optimizer.candidates.batch import data_parallel_width
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.workload import Workload
from optimizer.offer import LocalBuild, Offer, Part
from optimizer.resale import resellable_share
from optimizer.results import Estimate, HostNeeds, MemoryBreakdown

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
SYNTHETIC = "test: synthetic"
GIB_PER_GB = 2**30 / 1e9
# Parallel efficiency of each scheme on more than one GPU (ZeRO-3 communicates most).
EFFICIENCY = {"ddp": 0.95, "zero2": 0.9, "zero3": 0.8, "fsdp": 0.8, "zero1": 0.93}


@dataclass
class FakeEstimator:
    """Memory and hours from a small table; counts its calls."""

    mem_gb: float = 20.0
    single_gpu_hours: dict[str, float] = field(
        default_factory=lambda: {"A100": 4.0, "A100-80GB": 3.5, "H100": 2.0, "A10G": 10.0, "L4": 12.0,
                                 "T4": 30.0, "RTX4090": 6.0, "RTX3090": 9.0, "V100": 15.0}
    )
    ram_gb: float = 16.0
    cores: int = 4
    setup_hours: float = 0.1  # counted in the run's hours, as the real estimator does
    calls: list[tuple[str, int, str | None]] = field(default_factory=list)

    def mem_per_gpu(self, n: int, sharding: str) -> float:
        if n > 1 and sharding in ("zero3", "fsdp"):
            return self.mem_gb / n + 1.0
        if n > 1 and sharding == "zero2":
            return self.mem_gb * 0.8
        return self.mem_gb

    def hours(self, gpu: str, n: int, sharding: str) -> float:
        eff = EFFICIENCY.get(sharding, 1.0) if n > 1 else 1.0
        # GPUs missing from the table run at a speed proportional to their tensor throughput.
        base = self.single_gpu_hours.get(gpu) or 600.0 / gpu_spec(gpu).fp16_tensor_tflops
        return base / (n * eff)

    def __call__(self, workload: Workload, gpu: str, n: int, sharding: str | None) -> Estimate:
        self.calls.append((gpu, n, sharding))
        spec = gpu_spec(gpu)
        scheme = sharding or workload.sharding
        if scheme == "auto":
            # As the real estimator: the lightest scheme that fits, else the one needing least memory.
            tries = ["ddp", "zero2", "zero3"] if n > 1 else ["ddp"]
            fitting = [t for t in tries if self.mem_per_gpu(n, t) <= spec.vram_gb * GIB_PER_GB]
            scheme = fitting[0] if fitting else min(tries, key=lambda t: self.mem_per_gpu(n, t))
        sh = scheme
        mem = self.mem_per_gpu(n, sh)
        node = min(n, 8)
        return Estimate(
            params=1, trainable_params=1,
            memory_gb=MemoryBreakdown(weights=0, gradients=0, optimizer=0, activations=0, overhead=0,
                                      total_per_gpu=mem),
            gpu=gpu, gpu_count=n, gpu_vram_gb=spec.vram_gb, fits=mem <= spec.vram_gb * GIB_PER_GB, sharding=sh,
            train_flops=1.0, tokens_per_second=1000.0, mfu=0.4, hours=self.hours(gpu, n, sh) + self.setup_hours,
            host=HostNeeds(ram_gb=self.ram_gb * node, cpu_cores=self.cores * node, disk_gb=100.0),
            details={"hours_parts": {"setup_hours": self.setup_hours}},
        )


def shardings(workload_sharding: str, n: int) -> list[str]:
    return ["ddp"] if n <= 1 else (["ddp", "zero2", "zero3"] if workload_sharding == "auto" else [workload_sharding])


def offer(
    instance: str, gpu: str, count: float, price: float | None, *, provider: str = "aws", region: str = "us-east-1",
    zone: str | None = None, spot: float | None = None, ram_gb: float | None = 512, vcpus: float | None = 96,
    vram_gb: float | None = None, increment_s: int = 1, min_s: int = 0, fabric: bool | None = None,
) -> Offer:
    """``fabric`` None: as the instance type implies (``optimizer.offer``); 8-GPU test types say it."""
    extra = {} if fabric is None else {"inter_node_fabric": fabric}
    return Offer(
        provider=provider, region=region, zone=zone, instance_type=instance, gpu=gpu, gpu_count=count,
        gpu_vram_gb=vram_gb or gpu_spec(gpu).vram_gb, vcpus=vcpus, ram_gb=ram_gb, price_hour=price,
        spot_price_hour=spot, billing_increment_s=increment_s, min_billing_s=min_s, source=SYNTHETIC, as_of=AS_OF,
        **extra,
    )


def build(
    bid: str, gpu: str, price: float, *, count: int = 1, ram_gb: float = 64, cores: int = 8,
    load_w: float = 500, lead_days: float = 3, resale: float = 0.4, lifetime: int = 36, kwh: float = 0.16,
    gpu_share: float = 0.6,
) -> LocalBuild:
    """A build whose GPUs are ``gpu_share`` of the price (the part that resells)."""
    parts = [
        Part(id=f"{bid}-gpu", category="gpu", name=gpu, price_usd=price * gpu_share, source=SYNTHETIC, as_of=AS_OF),
        Part(id=f"{bid}-rest", category="board", name="rest", price_usd=price * (1 - gpu_share), source=SYNTHETIC,
             as_of=AS_OF),
    ]
    return LocalBuild(
        id=bid, name=bid, gpu=gpu, gpu_count=count, gpu_vram_gb=gpu_spec(gpu).vram_gb, cpu="cpu", cpu_cores=cores,
        ram_gb=ram_gb, storage="nvme", psu_w=1000, parts=parts, price_usd=price, load_power_w=load_w, idle_power_w=60,
        lifetime_months=lifetime, resale_fraction=resale, lead_time_days=lead_days, electricity_usd_per_kwh=kwh,
        source=SYNTHETIC, as_of=AS_OF,
    )


WORKLOAD = Workload(model="llama-3-8b", method="qlora", tokens=1e8)


@dataclass(frozen=True)
class Choice:
    cost_usd: float
    hours: float
    label: str
    gpus: float


def brute_force_single(
    workload: Workload,
    offers: list[Offer],
    builds: list[LocalBuild],
    est: FakeEstimator,
    *,
    runs: int = 1,
    deadline: float | None = None,
    budget: float | None = None,
    allow_spot: bool = False,
    max_nodes: int = 4,
    max_units: int = 2,
    max_utilization: float = 0.8,
) -> list[Choice]:
    """Every feasible way to run the job, enumerated without any pruning.

    Setup is billed once (the estimate's hours include it); several nodes only of 8-GPU offers with
    an inter-node fabric; a purchase buys the machines ``runs`` need at ``max_utilization`` of 730 h a
    month over the build's life, and a budget caps its cash (price of the machines plus energy)."""
    from optimizer import costs, spot_risk

    out: list[Choice] = []
    for o in offers:
        whole = float(o.gpu_count).is_integer()
        for pricing, price in (("on_demand", o.price_hour), ("spot", o.spot_price_hour)):
            if price is None or (pricing == "spot" and not allow_spot):
                continue
            multi = whole and o.gpu_count >= 8 and o.inter_node_fabric
            for nodes in range(1, (max_nodes if multi else 1) + 1):
                total = o.gpu_count * nodes
                if total > 64:
                    continue
                # The GPUs that train divide the global batch (the rest idle), or the option is out.
                n = data_parallel_width(workload.global_batch_size, int(total) if whole else 1)
                if n is None:
                    continue
                fitted = False
                for sh in shardings(workload.sharding, n) if n > 1 else [None]:
                    if fitted and workload.sharding == "auto":
                        break  # the lightest scheme that fits
                    e = est(workload, o.gpu, n, sh)
                    fits = e.fits if whole else e.memory_gb.total_per_gpu <= o.gpu_vram_gb * GIB_PER_GB
                    fitted = fitted or fits
                    share = o.gpu_count / min(total, 8) if whole else 1.0
                    if not fits or (o.ram_gb is not None and o.ram_gb < e.host.ram_gb * share):
                        continue
                    if o.vcpus is not None and o.vcpus < e.host.cpu_cores * share:
                        continue
                    setup = est.setup_hours
                    train = (e.hours - setup) if whole else (e.hours - setup) / o.gpu_count
                    # Spot: the offer's own reclaim rate on this job's checkpoint (optimizer.spot_risk).
                    spot_wall = spot_risk.train_wall_hours(
                        train, setup, nodes, spot_risk.spot_rate(o.provider, o.region, o.instance_type),
                        spot_risk.checkpoint_gb(e.trainable_params, workload.optimizer),
                    ) if pricing == "spot" else None
                    rc = costs.rent_cost(price, train, nodes, billing_increment_s=o.billing_increment_s,
                                         min_billing_s=o.min_billing_s, spot=pricing == "spot",
                                         setup_hours=setup, spot_train_wall_hours=spot_wall)
                    # The disk is billed with the instance (billed hours), as option generation bills it.
                    storage = costs.storage_usd(e.host.disk_gb, o.storage_usd_per_gb_month, rc.billed_hours, nodes)
                    cost = (rc.cost_per_run_usd + storage) * runs
                    if (deadline is not None and rc.wall_hours > deadline) or (budget is not None and cost > budget):
                        continue
                    out.append(Choice(cost, rc.wall_hours, f"{o.provider}/{o.instance_type}/{nodes}/{sh}/{pricing}",
                                      total))
    for b in builds:
        for units in range(1, max_units + 1):
            n = data_parallel_width(workload.global_batch_size, b.gpu_count * units)
            if n is None:
                continue
            fitted = False
            for sh in shardings(workload.sharding, n) if n > 1 else [None]:
                if units > 1 and sh in ("zero3", "fsdp"):
                    continue
                if fitted and workload.sharding == "auto":
                    break
                e = est(workload, b.gpu, n, sh)
                fitted = e.fits
                share = b.gpu_count / min(n, 8)
                if not e.fits or b.ram_gb < e.host.ram_gb * share or b.cpu_cores < e.host.cpu_cores * share:
                    continue
                if deadline is not None and e.hours + b.lead_time_days * 24 > deadline:
                    continue
                per_machine = 730.0 * max_utilization * b.lifetime_months
                machines = units * max(1, -(-e.hours * runs // per_machine))
                if machines > 16:
                    continue
                # An hour at idle power between runs (costs.IDLE_HOURS_PER_RUN), as option generation counts it.
                idle = costs.energy_cost_usd(costs.IDLE_HOURS_PER_RUN, b.idle_power_w, b.electricity_usd_per_kwh) * units
                bc = costs.buy_cost(b.price_usd, units, e.hours, runs, load_power_w=b.load_power_w,
                                    usd_per_kwh=b.electricity_usd_per_kwh, resale_fraction=b.resale_fraction,
                                    lifetime_months=b.lifetime_months, machines=int(machines),
                                    resellable_share=resellable_share(b))
                if budget is not None and bc.outlay_usd + idle * runs > budget:
                    continue
                out.append(Choice(bc.total_usd + idle * runs, e.hours, f"local/{b.id}/{units}/{sh}", b.gpu_count * units))
    return out
