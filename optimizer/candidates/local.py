"""Local options: builds x units x sharding -> a purchase Candidate, or a rejection reason."""

from __future__ import annotations

from collections.abc import Iterable

from optimizer import costs
from optimizer.candidates.estimator import Estimator, JobHost, Read, ShardingChoices, _canonical, _wanted_gpus
from optimizer.candidates.feeding import host_feed
from optimizer.candidates.local_sizes import sizes_at
from optimizer.candidates.rejections import (
    EXCLUDED,
    LATE,
    NO_HOST_CPU,
    NO_HOST_RAM,
    NO_MACHINE_HOURS,
    NO_VRAM,
    OVER_BUDGET,
    UNKNOWN_GPU,
    UNSUPPORTED,
    RejectionTally,
    _deeper,
)
from optimizer.candidates.types import GIB_PER_GB, MAX_TOTAL_GPUS, Candidate, CostAssumptions
from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import LocalBuild
from optimizer.resale import resellable_share
from optimizer.results import Estimate


def local_candidates(
    workload: Workload,
    constraints: Constraints,
    builds: Iterable[LocalBuild],
    *,
    runs: int,
    estimator: Estimator,
    shardings: ShardingChoices,
    assumptions: CostAssumptions,
    tally: RejectionTally,
    memo: dict[tuple[str, int, str | None], Read],
) -> list[Candidate]:
    """Every feasible (build, units, sharding) as a purchase candidate."""
    if not constraints.include_local:
        return []
    providers = {p.lower() for p in constraints.providers} if constraints.providers else None
    gpus = _wanted_gpus(constraints)
    max_gpus = min(constraints.max_gpus or MAX_TOTAL_GPUS, MAX_TOTAL_GPUS)
    kwh = assumptions.electricity_usd_per_kwh
    if kwh is None:
        kwh = constraints.electricity_usd_per_kwh
    out: list[Candidate] = []
    for b in builds:
        label = f"local/{b.id}"
        gpu = _canonical(b.gpu)
        if gpu is None:
            tally.add(UNKNOWN_GPU, label)
            continue
        if (providers is not None and "local" not in providers) or (gpus is not None and gpu not in gpus):
            tally.add(EXCLUDED, label)
            continue
        reason: str | None = None
        found = False
        walked = sizes_at(workload, gpu, b.gpu_count, max_gpus=max_gpus, max_units=assumptions.max_local_units,
                          margin=constraints.safety_margin, estimator=estimator, shardings=shardings, memo=memo)
        for size, hours, host in walked:
            est = size.est
            if est is None or hours is None or host is None:
                reason = _deeper(reason, size.reason or UNSUPPORTED)
                continue
            units, notes = size.units, size.notes
            fed = _fed(b, gpu, est, host, hours, units, workload.image_size) if assumptions.strict_host and est.fits \
                else None
            if fed is not None:  # a CPU-short build runs slower; below the 70 % floor it is rejected
                hours, notes = fed[0], (*notes, fed[1])
            r = _local_reason(b, est, host, hours, units, constraints, assumptions.strict_host, cpu_fed=fed is not None)
            if r is not None:
                reason = _deeper(reason, r)
                continue
            cand = _local_candidate(b, gpu, est, hours, units, runs, kwh, assumptions, notes)
            if cand is None:
                reason = _deeper(reason, NO_MACHINE_HOURS)
                continue
            # A budget caps the cash paid (machines and energy), not the cost net of resale.
            if constraints.budget_usd is not None and cand.outlay_usd > constraints.budget_usd:
                reason = _deeper(reason, OVER_BUDGET)
                continue
            out.append(cand)
            found = True
        if not found:
            tally.add(reason or UNSUPPORTED, label)
    return out


def _fed(b: LocalBuild, gpu: str, est: Estimate, host: JobHost, hours: float, units: int,
         image_size: int) -> tuple[float, str] | None:
    """The run's hours (``hours``: ``est``'s for the request's amount) on a build with fewer cores
    than a full feed wants: slowed to what they feed (or unchanged with GPU JPEG decoding), with the
    note; None when the cores suffice or fall under the 70 % floor (then ``_local_reason`` rejects
    it for CPU). ``host``: ``job_host(est)`` for the request's amount."""
    share = b.gpu_count / min(b.gpu_count * units, 8)
    need = host.cpu_cores * share
    if b.cpu_cores >= need:
        return None
    images = (est.details.get("host_feed") or {}).get("unit") == "images" if est.details else False
    feed = host_feed(float(b.cpu_cores), need, images=images, gpu=gpu, image_size=image_size)
    if feed is None:
        return None
    train = hours - host.setup_hours
    return host.setup_hours + train / feed.busy_share, feed.note


def _local_reason(
    b: LocalBuild, est: Estimate, host: JobHost, hours: float, units: int, constraints: Constraints,
    strict_host: bool = True, cpu_fed: bool = False,
) -> str | None:
    """``host`` and ``hours``: the job's host needs and the run's hours for the request's amount;
    ``cpu_fed``: the build's cores were found short but able to feed the GPUs (``_fed``)."""
    if not est.fits or est.memory_gb.total_per_gpu > b.gpu_vram_gb * GIB_PER_GB:
        return NO_VRAM
    # The estimator sizes one node of up to 8 GPUs; each unit is one node. The job's own needs
    # decide (the 32 GB / 8-core floors are advice for choosing parts, given by ``recommend``).
    share = b.gpu_count / min(b.gpu_count * units, 8)
    if strict_host and b.ram_gb < host.ram_gb * share:
        return NO_HOST_RAM
    if strict_host and b.cpu_cores < host.cpu_cores * share and not cpu_fed:
        return NO_HOST_CPU
    deadline = constraints.deadline_hours
    # A machine not yet bought has to be delivered and assembled first.
    if deadline is not None and hours + b.lead_time_days * 24 > deadline:
        return LATE
    return None


def _local_candidate(
    b: LocalBuild, gpu: str, est: Estimate, hours: float, units: int, runs: int, kwh: float | None,
    a: CostAssumptions, warnings: tuple[str, ...] = (),
) -> Candidate | None:
    """The purchase of as many machines as ``runs`` need within the time they are held (``hours``
    each: ``est``'s for the request's amount); None when that is more than ``a.max_machines``."""
    usd_per_kwh = b.electricity_usd_per_kwh if kwh is None else kwh
    held = b.lifetime_months if a.held_months is None else a.held_months
    sizing = costs.machines_needed(hours * runs * units, held, a.max_utilization, units)
    if sizing.machines > a.max_machines:
        return None
    bc = costs.buy_cost(
        b.price_usd,
        units,
        hours,
        runs,
        load_power_w=b.load_power_w,
        idle_power_w=b.idle_power_w,
        usd_per_kwh=usd_per_kwh,
        resale_fraction=b.resale_fraction,
        lifetime_months=b.lifetime_months,
        held_months=a.held_months,
        psu_efficiency=a.psu_efficiency,
        machines=sizing.machines,
        resellable_share=resellable_share(b),
    )
    # Between runs the machine idles for a while (``a.idle_hours_per_run``) at the build's idle power.
    idle_per_run = costs.energy_cost_usd(a.idle_hours_per_run, b.idle_power_w, usd_per_kwh, a.psu_efficiency) * units
    breakdown = bc.breakdown()
    breakdown["idle_energy_usd"] = idle_per_run * runs
    breakdown["usd_per_kwh"] = usd_per_kwh
    breakdown["lead_time_hours"] = b.lead_time_days * 24
    breakdown["machine_hours_needed"] = sizing.hours_needed
    breakdown["machine_hours_available"] = sizing.hours_available_per_machine * sizing.machines
    return Candidate(
        key=f"local/{b.id}/{units}/{est.sharding}",
        kind="local",
        provider="local",
        region=None,
        zone=None,
        instance_type=b.id,
        gpu=gpu,
        gpus_per_node=b.gpu_count,
        nodes=units,
        pricing="purchase",
        hourly_usd=costs.energy_cost_usd(1.0, b.load_power_w, usd_per_kwh, a.psu_efficiency) * units,
        hours=hours,
        fixed_usd=bc.capex_usd - bc.resale_usd,
        cost_per_run_usd=bc.energy_per_run_usd + idle_per_run,
        runs=runs,
        memory_need_gb_per_gpu=est.memory_gb.total_per_gpu,
        vram_gb_per_gpu=b.gpu_vram_gb,
        sharding=est.sharding or "none",
        breakdown=breakdown,
        source=b.source,
        as_of=b.as_of,
        total_gpus=b.gpu_count * units,
        lead_hours=b.lead_time_days * 24,
        capex_usd=bc.capex_usd,
        machines=sizing.machines,
        utilization=sizing.utilization,
        recipe=est.recipe,
        basis=est.basis,
        measurement_id=est.measurement_id,
        warnings=warnings,
    )
