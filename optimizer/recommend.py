"""Which machine to buy for a job: the cheapest *balanced* local build that runs it, each part
justified, next to the best rental.

Balanced means the seeds' rules hold (seeds 000 and 001):

* GPU: the job fits in its VRAM (one better card rather than several small ones) and meets the
  deadline; the faster card only when the cheaper one misses it.
* CPU: at least 8 cores, and enough to keep the GPU fed (predicted GPU utilisation >= 70 %).
* RAM: at least 32 GB and at least what loading the model and caching the dataset need.
* Storage: NVMe, large enough for dataset, model, checkpoints and environment, and fast enough
  for the data pipeline.

Builds come from the catalog and, when a parts list is given, are also composed from it: the
cheapest GPU part of each card that fits, and the cheapest CPU, RAM, storage, board, PSU, case and
cooler that satisfy the rules above.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from optimizer import costs
from optimizer.breakeven import Owning, breakeven_month, machines_for, resellable_share
from optimizer.candidates import MAX_MACHINES, Estimator, ShardingChoices, default_estimator, generate
from optimizer.errors import GpucostError, UnknownModel, UnsupportedConfig
from optimizer.estimator.gpus import find_gpu, gpu_spec
from optimizer.estimator.host import disk_read_share, predicted_gpu_utilization
from optimizer.estimator.workload import Constraints, Workload
from optimizer.explain import rejected_groups, to_option
from optimizer.offer import LocalBuild, Offer, Part
from optimizer.results import Estimate, Option, RejectedGroup

MIN_CPU_CORES = 8  # seeds 000 and 001: >= 8 cores / 16 threads
MIN_RAM_GB = 32.0  # seeds 000 and 001: 32 GB minimum
MIN_GPU_UTILIZATION = 0.70  # seed 000: keep the GPU above 70 % busy
# PSU sized so the load stays under 80 % of its rating (a common rule of thumb for headroom and
# efficiency); board, drives and fans budgeted at 100 W. Assumptions, not measurements.
PSU_LOAD_SHARE = 0.8
REST_OF_SYSTEM_W = 100.0
DEFAULT_CPU_TDP_W = 125.0
GIB_PER_GB = 2**30 / 1e9


class ComponentChoice(BaseModel):
    category: str
    name: str
    count: int = 1
    price_usd: float | None = None
    need: str
    why: str
    ok: bool = True
    part_id: str | None = None
    source: str | None = None


class BuildRecommendation(BaseModel):
    build_id: str
    name: str
    origin: str  # "catalog" | "composed from parts"
    gpu: str
    gpu_count: int
    price_usd: float
    hours_per_run: float
    energy_per_run_usd: float
    memory_need_gb_per_gpu: float
    vram_gb_per_gpu: float
    balanced: bool
    components: list[ComponentChoice]
    warnings: list[str] = Field(default_factory=list)
    breakeven_runs: int | None = None
    breakeven_months: float | None = None
    machines: int = Field(default=1, description="machines the cadence needs (730 h a month each, at most "
                          "max_utilization busy)")
    utilization: float = Field(default=0.0, description="share of those machines' hours the runs use")
    capex_usd: float = Field(default=0.0, description="price of all the machines")
    advice: list[str] = Field(default_factory=list, description="the seeds' build floors this build is below")
    source: str | None = None
    as_of: datetime | None = None


class Needs(BaseModel):
    vram_gb_per_gpu: float
    ram_gb: float
    cpu_cores: int
    disk_gb: float
    tokens_per_second: float


class RecommendResult(BaseModel):
    recommendation: BuildRecommendation | None
    alternatives: list[BuildRecommendation]
    best_rental: Option | None
    rejected: list[RejectedGroup]
    runs_per_month: float
    prices_as_of: dict[str, datetime] = Field(default_factory=dict)
    snapshot_id: str = ""
    notes: list[str] = Field(default_factory=list)


def _estimate(
    workload: Workload, gpu: str, count: int, estimator: Estimator, shardings: ShardingChoices | None
) -> Estimate | None:
    """The lightest sharding that fits on ``count`` GPUs of one machine (or the last tried)."""
    from optimizer.candidates import default_shardings

    choices = (shardings or default_shardings())(workload.sharding, count) if count > 1 else [None]
    last = None
    for sh in choices:
        try:
            last = estimator(workload, gpu, count, sh)
        except (UnknownModel, UnsupportedConfig):
            raise
        except GpucostError:
            continue
        if last.fits:
            return last
    return last


def _spec_float(part: Part, *keys: str) -> float | None:
    for k in keys:
        v = part.specs.get(k)
        if v is not None:
            try:
                return float(v)
            except (TypeError, ValueError):
                continue
    return None


def _cheapest_fill(parts: Sequence[Part], need: float, key: tuple[str, ...], max_count: int) -> tuple[Part, int] | None:
    """Cheapest (part, count) whose total capacity covers ``need``."""
    best: tuple[float, Part, int] | None = None
    for p in parts:
        cap = _spec_float(p, *key)
        if not cap:
            continue
        for n in range(1, max_count + 1):
            if cap * n >= need:
                if best is None or p.price_usd * n < best[0]:
                    best = (p.price_usd * n, p, n)
                break
    return (best[1], best[2]) if best else None


def compose_builds(parts: Sequence[Part], needs: Needs, as_of: datetime | None = None) -> list[LocalBuild]:
    """One single-GPU build per card in ``parts``, the other parts the cheapest that meet ``needs``."""
    # The same item priced at several dates: only its newest price counts.
    newest: dict[tuple[str, str], Part] = {}
    for p in parts:
        k = (p.category, p.name)
        if k not in newest or p.as_of > newest[k].as_of:
            newest[k] = p
    by_cat: dict[str, list[Part]] = {}
    for p in newest.values():
        by_cat.setdefault(p.category, []).append(p)
    cpus = [p for p in by_cat.get("cpu", []) if (_spec_float(p, "cores") or 0) >= max(MIN_CPU_CORES, needs.cpu_cores)]
    cpu = min(cpus, key=lambda p: p.price_usd, default=None)
    ram = _cheapest_fill(by_cat.get("ram", []), max(MIN_RAM_GB, needs.ram_gb), ("gb", "capacity_gb"), 4)
    disk = _cheapest_fill(by_cat.get("storage", []), needs.disk_gb, ("gb", "capacity_gb"), 2)
    board = min(by_cat.get("board", []), key=lambda p: p.price_usd, default=None)
    case = min(by_cat.get("case", []), key=lambda p: p.price_usd, default=None)
    cooler = min(by_cat.get("cooler", []), key=lambda p: p.price_usd, default=None)
    if cpu is None or ram is None or disk is None or board is None:
        return []
    gpus: dict[str, Part] = {}
    for p in by_cat.get("gpu", []):
        name = str(p.specs.get("gpu", p.name))
        canon = find_gpu(name)
        if canon is None:
            continue
        if canon not in gpus or p.price_usd < gpus[canon].price_usd:
            gpus[canon] = p
    cpu_tdp = _spec_float(cpu, "tdp_w") or DEFAULT_CPU_TDP_W
    out = []
    for canon, gpart in gpus.items():
        spec = gpu_spec(canon)
        load_w = spec.tdp_w + cpu_tdp + REST_OF_SYSTEM_W
        psus = [p for p in by_cat.get("psu", []) if (_spec_float(p, "watts", "w") or 0) * PSU_LOAD_SHARE >= load_w]
        psu = min(psus, key=lambda p: p.price_usd, default=None)
        if psu is None:
            continue
        chosen = [gpart, cpu, board, psu, *([case] if case else []), *([cooler] if cooler else [])]
        chosen += [ram[0]] * ram[1] + [disk[0]] * disk[1]
        dates = [p.as_of for p in chosen]
        out.append(
            LocalBuild(
                id=f"composed-{canon.lower()}",
                name=f"{spec.name} + {cpu.name} + {(_spec_float(ram[0], 'gb', 'capacity_gb') or 0) * ram[1]:.0f} GB RAM",
                tier="composed",
                gpu=canon,
                gpu_count=1,
                gpu_vram_gb=spec.vram_gb,
                cpu=cpu.name,
                cpu_cores=int(_spec_float(cpu, "cores") or MIN_CPU_CORES),
                ram_gb=(_spec_float(ram[0], "gb", "capacity_gb") or 0) * ram[1],
                storage=disk[0].name,
                storage_gb=(_spec_float(disk[0], "gb", "capacity_gb") or 0) * disk[1],
                psu_w=_spec_float(psu, "watts", "w") or 0,
                parts=chosen,
                price_usd=sum(p.price_usd for p in chosen),
                load_power_w=load_w,
                idle_power_w=0.0,
                source="composed from parts: " + ", ".join(p.id for p in chosen),
                as_of=as_of or max(dates),
            )
        )
    return out


def _components(b: LocalBuild, est: Estimate, needs: Needs) -> list[ComponentChoice]:
    by_cat: dict[str, list[Part]] = {}
    for p in b.parts:
        by_cat.setdefault(p.category, []).append(p)

    def priced(cat: str) -> tuple[float | None, str | None, str | None]:
        ps = by_cat.get(cat, [])
        if not ps:
            return None, None, None
        return sum(p.price_usd for p in ps), ps[0].id, ps[0].source

    util = predicted_gpu_utilization(est.tokens_per_second, b.cpu_cores)
    cores_need = max(MIN_CPU_CORES, needs.cpu_cores)
    ram_need = max(MIN_RAM_GB, needs.ram_gb)
    read_share = disk_read_share(est.tokens_per_second, "nvme")
    fits = est.fits and est.memory_gb.total_per_gpu <= b.gpu_vram_gb * GIB_PER_GB
    rows = []
    p, pid, src = priced("gpu")
    rows.append(ComponentChoice(
        category="gpu", name=f"{b.gpu_count}x {b.gpu}", count=b.gpu_count, price_usd=p, part_id=pid, source=src,
        need=f"{est.memory_gb.total_per_gpu:.1f} GB per GPU ({est.sharding})",
        why=(f"{b.gpu_vram_gb:g} GB VRAM holds the {est.memory_gb.total_per_gpu:.1f} GB peak; "
             f"{est.hours:.1f} h per run at {est.tokens_per_second:,.0f} tokens/s"),
        ok=fits,
    ))
    p, pid, src = priced("cpu")
    rows.append(ComponentChoice(
        category="cpu", name=b.cpu, price_usd=p, part_id=pid, source=src,
        need=f">= {cores_need} cores (data feeding needs {needs.cpu_cores}; seeds: >= {MIN_CPU_CORES})",
        why=f"{b.cpu_cores} cores keep the GPU {util:.0%} fed (target >= {MIN_GPU_UTILIZATION:.0%})",
        ok=b.cpu_cores >= cores_need and util >= MIN_GPU_UTILIZATION,
    ))
    p, pid, src = priced("ram")
    rows.append(ComponentChoice(
        category="ram", name=f"{b.ram_gb:g} GB", price_usd=p, part_id=pid, source=src,
        need=f">= {ram_need:.0f} GB (loading + dataset cache {needs.ram_gb:.0f} GB; seeds: >= {MIN_RAM_GB:.0f})",
        why=f"{b.ram_gb:g} GB holds model loading and the dataset cache without swapping",
        ok=b.ram_gb >= ram_need,
    ))
    p, pid, src = priced("storage")
    rows.append(ComponentChoice(
        category="storage", name=f"{b.storage} ({b.storage_gb:g} GB)", price_usd=p, part_id=pid, source=src,
        need=f">= {needs.disk_gb:.0f} GB NVMe (dataset, model, checkpoints, environment)",
        why=f"{b.storage_gb:g} GB; the data pipeline uses {read_share:.2%} of an NVMe's sequential read",
        ok=b.storage_gb >= needs.disk_gb and read_share <= 1.0,
    ))
    for cat in ("board", "psu", "case", "cooler"):
        p, pid, src = priced(cat)
        if p is None:
            continue
        part = by_cat[cat][0]
        why = {"board": "holds the GPUs and the CPU", "psu": f"{b.psu_w:g} W for about {b.load_power_w:g} W at load",
               "case": "airflow for the load", "cooler": "keeps the CPU at its clocks under sustained load"}[cat]
        rows.append(ComponentChoice(category=cat, name=part.name, price_usd=p, part_id=pid, source=src,
                                    need="-", why=why))
    return rows


def _advice(b: LocalBuild) -> list[str]:
    out = []
    if b.cpu_cores < MIN_CPU_CORES:
        out.append(f"advice: the seeds suggest >= {MIN_CPU_CORES} CPU cores for a training build ({b.cpu_cores} here)")
    if b.ram_gb < MIN_RAM_GB:
        out.append(f"advice: the seeds suggest >= {MIN_RAM_GB:.0f} GB RAM for a training build ({b.ram_gb:g} GB here)")
    return out


def recommend(
    workload: Workload,
    builds: Iterable[LocalBuild],
    offers: Iterable[Offer],
    *,
    parts: Sequence[Part] | None = None,
    budget_usd: float | None = None,
    deadline_hours: float | None = None,
    runs_per_month: float = 4,
    electricity_usd_per_kwh: float | None = None,
    prices_as_of: Mapping[str, datetime] | None = None,
    snapshot_id: str = "",
    estimator: Estimator | None = None,
    shardings: ShardingChoices | None = None,
    top: int = 5,
) -> RecommendResult:
    est_fn = estimator or default_estimator()
    catalog = list(builds)
    # What the job needs of a host, from a reference single-GPU estimate (host needs depend on the
    # model and the data, hardly on the card).
    ref_gpu = "RTX4090"
    ref = _estimate(workload, ref_gpu, 1, est_fn, shardings)
    needs = Needs(
        vram_gb_per_gpu=ref.memory_gb.total_per_gpu if ref else 0.0,
        ram_gb=ref.host.ram_gb if ref else MIN_RAM_GB,
        cpu_cores=ref.host.cpu_cores if ref else MIN_CPU_CORES,
        disk_gb=ref.host.disk_gb if ref else 0.0,
        tokens_per_second=ref.tokens_per_second if ref else 0.0,
    )
    pool = catalog + (compose_builds(parts, needs) if parts else [])

    rental_q = generate(
        workload, Constraints(include_local=False, deadline_hours=deadline_hours), offers, [], runs=1, top=1,
        estimator=est_fn, shardings=shardings,
    )
    rental = rental_q.ranked[0] if rental_q.ranked else None

    recs: list[BuildRecommendation] = []
    rejected: dict[str, list[str]] = {}
    for b in pool:
        gpu = find_gpu(b.gpu)
        if gpu is None:
            rejected.setdefault("unknown GPU", []).append(b.id)
            continue
        est = _estimate(workload, gpu, b.gpu_count, est_fn, shardings)
        if est is None:
            rejected.setdefault("not supported by the estimator", []).append(b.id)
            continue
        comps = _components(b, est, Needs(
            vram_gb_per_gpu=est.memory_gb.total_per_gpu, ram_gb=est.host.ram_gb, cpu_cores=est.host.cpu_cores,
            disk_gb=est.host.disk_gb, tokens_per_second=est.tokens_per_second,
        ))
        if not comps[0].ok:
            rejected.setdefault("insufficient VRAM", []).append(b.id)
            continue
        if deadline_hours is not None and est.hours > deadline_hours:
            rejected.setdefault("misses deadline", []).append(b.id)
            continue
        sizing = machines_for(runs_per_month, est.hours, 1, costs.MAX_UTILIZATION)
        if sizing.machines > MAX_MACHINES:
            rejected.setdefault("needs more machines than allowed", []).append(b.id)
            continue
        capex = b.price_usd * sizing.machines
        # The budget caps the cash paid for the machines.
        if budget_usd is not None and capex > budget_usd:
            rejected.setdefault("over budget", []).append(b.id)
            continue
        kwh = b.electricity_usd_per_kwh if electricity_usd_per_kwh is None else electricity_usd_per_kwh
        energy = costs.energy_cost_usd(est.hours, b.load_power_w, kwh)
        n = months = None
        if rental is not None:
            own = Owning(b.price_usd, sizing.machines, energy, b.resale_fraction, b.lifetime_months,
                         resellable_share(b))
            months = breakeven_month(rental.cost_per_run_usd, own, runs_per_month)
            n = None if months is None else max(0, math.ceil(months * runs_per_month - 1e-9))
        warnings = [f"{c.category}: needs {c.need}" for c in comps if not c.ok]
        advice = _advice(b)
        recs.append(BuildRecommendation(
            build_id=b.id, name=b.name, origin="composed from parts" if b.tier == "composed" else "catalog",
            gpu=gpu, gpu_count=b.gpu_count, price_usd=round(b.price_usd, 2), hours_per_run=round(est.hours, 3),
            energy_per_run_usd=round(energy, 4), memory_need_gb_per_gpu=est.memory_gb.total_per_gpu,
            vram_gb_per_gpu=b.gpu_vram_gb, balanced=not warnings, components=comps, warnings=warnings,
            breakeven_runs=n, breakeven_months=round(months, 2) if months is not None else None,
            machines=sizing.machines, utilization=round(sizing.utilization, 4), capex_usd=round(capex, 2),
            advice=advice, source=b.source, as_of=b.as_of,
        ))
    # Balanced first, then cheapest to buy (all the machines the cadence needs), then fastest.
    recs.sort(key=lambda r: (not r.balanced, r.capex_usd, r.hours_per_run))
    best = recs[0] if recs and recs[0].balanced else None
    notes = [
        "balanced = the seeds' rules: >= 8 CPU cores and >= 70 % predicted GPU feeding, >= 32 GB RAM "
        "and what loading needs, NVMe large enough for data, model and checkpoints",
        "the 8-core and 32 GB floors are the seeds' advice for building a machine, not what the job needs; "
        "quotes judge rentals and builds on the job's own needs",
        f"machines: each runs at most {costs.MAX_UTILIZATION:.0%} of its 730 h a month; "
        f"{runs_per_month:g} runs a month set how many the job needs",
    ]
    if best is None and recs:
        notes.append("no build meets every balancing rule; the alternatives list what each one lacks")
    build_rejections = [
        RejectedGroup(reason=k, count=len(v), examples=v[:3]) for k, v in sorted(rejected.items())
    ]
    if rental is None:
        build_rejections += rejected_groups(rental_q.rejected)
    return RecommendResult(
        recommendation=best,
        alternatives=[r for r in recs if r is not best][:top],
        best_rental=to_option(rental) if rental is not None else None,
        rejected=build_rejections,
        runs_per_month=runs_per_month,
        prices_as_of=dict(prices_as_of or {}),
        snapshot_id=snapshot_id,
        notes=notes,
    )


__all__ = ["BuildRecommendation", "ComponentChoice", "RecommendResult", "compose_builds", "recommend"]
