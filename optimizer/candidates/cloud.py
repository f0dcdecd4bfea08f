"""Cloud options: offers x nodes x sharding x pricing -> a Candidate, or a rejection reason.

The estimator runs once per distinct (GPU, total GPU count, sharding): every offer with the same GPU
and GPUs per node shares those estimates, so a catalog of thousands of offers costs a few hundred
estimates at most. Within such a group every offer has the same hours for a given configuration, so

* per configuration only the cheapest host-compatible offer can be Pareto-optimal in (hours, cost):
  those rows go to the ILP and to the frontier;
* per offer only its cheapest configuration is shown in the ranked list of alternatives.

An offer that has no feasible configuration is rejected once, with the reason of the check it got
furthest in (VRAM, then host, then deadline, then budget).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from optimizer import costs, spot_risk
from optimizer.candidates.amount_rows import BATCH_AFTER, MoveRows
from optimizer.candidates.amounts import KeptMoves, MovingMemo, amount_key, moved_groups, take_read
from optimizer.candidates.batch import batch_reason, cannot_keep, data_parallel_width, recipe_reason
from optimizer.candidates.estimator import (
    Estimator,
    Read,
    ShardingChoices,
    _canonical,
    _wanted_gpus,
    host_share,
    job_host,
    kept_across_requests,
    made,
    read_estimate,
    unfit_reader,
    whole_gpus,
)
from optimizer.candidates.feeding import host_feed
from optimizer.candidates.fitting import settle
from optimizer.candidates.headroom import TIGHT_PREFIX
from optimizer.candidates.offer_groups import OfferList
from optimizer.candidates.rejections import (
    EXCLUDED,
    LATE,
    NO_HOST_CPU,
    NO_HOST_RAM,
    NO_PRICE,
    NO_VRAM,
    OVER_BUDGET,
    OVER_QUOTA,
    TOO_MANY_GPUS,
    UNKNOWN_GPU,
    UNSUPPORTED,
    RejectionTally,
    _deeper,
)
from optimizer.candidates.types import (
    GIB_PER_GB,
    MAX_TOTAL_GPUS,
    Candidate,
    CostAssumptions,
    Pricing,
)
from optimizer.egress_prices import egress_usd_per_gb
from optimizer.estimator.estimate import Unfit, on_clear
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import Offer
from optimizer.price_warnings import PriceScreen
from optimizer.results import Estimate, Recipe
from optimizer.spot_walls import wall_hours
from optimizer.subscriptions import SubscriptionLimits, monthly_floor_usd, session_plan, subscription_of

MIN_GPUS_FOR_MULTI_NODE = 8


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class _Config:
    """One estimate shared by every offer of a (GPU, GPUs per node) group."""

    nodes: int
    sharding: str
    train_hours: float
    mem_gb: float
    ram_gb_per_node: float
    cores_per_node: float
    total_gpus: float
    reason: str | None  # config-level failure (VRAM, max GPUs, quota, unsupported)
    setup_hours: float = 0.0  # per node per run, billed once
    recipe: Recipe | None = None
    disk_gb_per_node: float = 0.0  # checkpoint, dataset and outputs: rented as block storage
    checkpoint_gb: float = 0.0  # what a spot run saves to survive a reclaim (optimizer.spot_risk)
    basis: str = "model"  # the estimate's basis (optimizer.measured)
    measurement_id: str | None = None
    warnings: tuple[str, ...] = ()  # what the option should say: a tight fit, idle GPUs
    images: bool = False  # an image job (JPEG decoding feeds it; ``candidates.feeding``)
    # The estimate it was made from, to move it to another amount of training (``candidates.amounts``);
    # a moved configuration keeps the one it was moved from (its amount figures are the config's own).
    source: Estimate | None = field(default=None, compare=False, repr=False)

    def __init__(
        self, nodes: int, sharding: str, train_hours: float, mem_gb: float, ram_gb_per_node: float, cores_per_node: float,
        total_gpus: float, reason: str | None, setup_hours: float = 0.0, recipe: Recipe | None = None,
        disk_gb_per_node: float = 0.0, checkpoint_gb: float = 0.0, basis: str = "model",
        measurement_id: str | None = None, warnings: tuple[str, ...] = (), images: bool = False,
        source: Estimate | None = None,
    ) -> None:
        self.nodes = nodes
        self.sharding = sharding
        self.train_hours = train_hours
        self.mem_gb = mem_gb
        self.ram_gb_per_node = ram_gb_per_node
        self.cores_per_node = cores_per_node
        self.total_gpus = total_gpus
        self.reason = reason
        self.setup_hours = setup_hours
        self.recipe = recipe
        self.disk_gb_per_node = disk_gb_per_node
        self.checkpoint_gb = checkpoint_gb
        self.basis = basis
        self.measurement_id = measurement_id
        self.warnings = warnings
        self.images = images
        self.source = source

    def moved(self, train_hours: float, ram_gb_per_node: float, setup_hours: float, disk_gb_per_node: float) -> _Config:
        """This configuration at another amount of training (``amounts.KeptMoves``): the figures that
        follow the amount (``amounts.MOVED_FIELDS``) as given, every other field its own. Written out
        so the compiled module makes it with one direct call (``tests/unit/test_moved_configs.py``
        holds it to every field)."""
        return _Config(
            self.nodes, self.sharding, train_hours, self.mem_gb, ram_gb_per_node, self.cores_per_node,
            self.total_gpus, self.reason, setup_hours, self.recipe, disk_gb_per_node, self.checkpoint_gb,
            self.basis, self.measurement_id, self.warnings, self.images, self.source,
        )


# A group's (GPU, GPUs per node, memory per GPU, inter-node fabric, subscription plan).
_GroupKey = tuple[str, float, float, bool, str | None]


def _offer_label(o: Offer) -> str:
    return f"{o.provider}/{o.instance_type}"


def _configs(
    workload: Workload,
    gpu: str,
    gpus_per_node: float,
    vram_gb: float,
    *,
    estimator: Estimator,
    shardings: ShardingChoices,
    max_nodes: int,
    max_gpus: int,
    quota: int | None,
    memo: dict[tuple[str, int, str | None], Read],
    fabric: bool = False,
    setup_hours: float | None = None,
    margin: float | None = None,
) -> list[_Config]:
    out: list[_Config] = []
    batch_size = workload.global_batch_size
    whole = whole_gpus(gpus_per_node)
    # Several nodes only of full-size instances sold with an inter-node fabric (EFA, InfiniBand,
    # GPUDirect): data-parallel training across machines runs at the estimated speed only there.
    multi_node = whole and gpus_per_node >= MIN_GPUS_FOR_MULTI_NODE and fabric
    node_counts = range(1, max_nodes + 1) if multi_node else range(1, 2)
    reader = unfit_reader(estimator)
    for nodes in node_counts:
        total = gpus_per_node * nodes
        if total > max_gpus:
            break
        offered = int(total) if whole else 1
        # The GPUs that train: all of them, or those that divide the global batch (the rest idle).
        count = data_parallel_width(batch_size, offered)
        if count is None:
            out.append(_Config(nodes, "none", 0, 0, 0, 0, total, cannot_keep(batch_size, offered)))
            continue
        fitted: set[str] = set()
        roomy = False  # a scheme fits these nodes with headroom
        for sharding in _sharding_calls(workload, count, shardings):
            if sharding in _SLOWER_THAN and fitted & _SLOWER_THAN[sharding]:
                continue  # same compute, strictly more traffic than a scheme that already fits
            if roomy and workload.sharding == "auto":
                # ``auto`` takes the lightest scheme that fits with headroom: DDP, then ZeRO-2, then
                # ZeRO-3 (a tight fit lets the next scheme try for headroom).
                break
            key = (gpu, count, sharding)
            if whole:
                est = memo.get(key)
                if est is None:
                    # Where nothing fits, only that: a whole card is rejected for it.
                    est = memo[key] = read_estimate(estimator, reader, workload, gpu, count, sharding)
            else:
                # A partition compares the estimate's memory with its own share: it reads the estimate.
                est = made(estimator, memo, workload, key)
            label = sharding or "none"
            if isinstance(est, str):
                out.append(_Config(nodes, label, 0, 0, 0, 0, total, est))
                continue
            if isinstance(est, Unfit):
                # As below for an estimate that does not fit: its recipe's batch (``settle``), then
                # the quota, then its memory.
                rejected = batch_reason(est.recipe, offered) or _limit_reason(quota, total, fits=False)
                out.append(_Config(nodes, est.sharding or label, 0, 0, 0, 0, total, rejected))
                continue
            notes: tuple[str, ...] = ()
            if whole:
                settled = settle(estimator, workload, est, gpus=offered, used=count, sharding=sharding, margin=margin)
                if settled.est is None:
                    out.append(_Config(nodes, est.sharding or label, 0, 0, 0, 0, total, settled.reason))
                    continue
                est, notes = settled.est, settled.warnings
            elif (why := recipe_reason(est, 1)) is not None:
                out.append(_Config(nodes, est.sharding or label, 0, 0, 0, 0, total, why))
                continue
            label = est.sharding or label
            host = job_host(est)
            setup = host.setup_hours if setup_hours is None else setup_hours
            # The estimate's hours include its setup; option generation bills setup once, apart.
            train = max(0.0, est.hours - host.setup_hours)
            # A GPU partition (g6f: a quarter GPU) runs at its share of the card's speed and has
            # its share of the memory; marketed memory sizes are binary (a "24 GB" card has 24 GiB).
            hours = train if whole else train / gpus_per_node
            fits = est.fits if whole else est.memory_gb.total_per_gpu <= vram_gb * GIB_PER_GB
            # The estimator sizes the host for one node of up to 8 GPUs.
            share = host_share(gpus_per_node, total)[1]
            if fits and _recipe_unconstrained(est, workload):
                fitted.add(label)
            reason = _limit_reason(quota, total, fits)
            out.append(
                _Config(
                    nodes=nodes,
                    sharding=label,
                    train_hours=hours,
                    mem_gb=est.memory_gb.total_per_gpu,
                    # Host needs grow with the GPUs each node feeds.
                    ram_gb_per_node=host.ram_gb * share,
                    cores_per_node=host.cpu_cores * share,
                    total_gpus=total,
                    reason=reason,
                    setup_hours=setup,
                    recipe=est.recipe,
                    disk_gb_per_node=est.host.disk_gb,
                    checkpoint_gb=spot_risk.checkpoint_gb(est.trainable_params, workload.optimizer),
                    basis=est.basis,
                    measurement_id=est.measurement_id,
                    warnings=notes,
                    images=bool((est.details.get("host_feed") or {}).get("unit") == "images"),
                    source=est,
                )
            )
            roomy = roomy or (reason is None and not _tight(out[-1]))
    # Headroom first: a tight fit stays only where no scheme fits these nodes with headroom.
    safe_nodes = {c.nodes for c in out if c.reason is None and not _tight(c)}
    return [c for c in out if not (c.nodes in safe_nodes and c.reason is None and _tight(c))]


def _limit_reason(quota: int | None, total: float, fits: bool) -> str | None:
    """Why a configuration is rejected after its recipe: the provider's GPU quota, then memory."""
    if quota is not None and total > quota:
        return OVER_QUOTA
    return None if fits else NO_VRAM


def _tight(c: _Config) -> bool:
    return any(w.startswith(TIGHT_PREFIX) for w in c.warnings)


# A group's configurations for one workload follow from the workload and the hardware alone (with
# the product's estimator and sharding choices), so they are kept across requests like the
# estimates they are made of: bounded, least recently used out. Each entry holds the estimates it
# read, which a request's own memo takes in, so what a quote reports it estimated does not change.
# An unrestricted quote reads about 130 groups, so 4,096 entries hold the last 30 or so workloads,
# whose estimates the estimator's own memo (8,192 per table) still mostly holds: at 8,192 the entries
# kept estimates alive that it had let go, and bench/footprint.py saw the server 94 MB larger after
# 200 distinct quotes; at 4,096 it saw 212 MB against 229 MB at 2,048 (same run, noise). 2,048 held
# 15 workloads, fewer than bench/load.py's 18 jobs, so a sweep of tokens over them was mostly cold.
CONFIGS_MEMO_SIZE = 4096
_EstimateKey = tuple[str, int, str | None]
_Memo = dict[_EstimateKey, Read]
# (configurations, the estimates read, the amount of training they hold, how they move to another)
_KeptConfigs = tuple[
    list[_Config], tuple[tuple[_EstimateKey, Read], ...], tuple[float | None, ...], KeptMoves[_Config]
]
_CONFIGS: LruMemo[tuple[object, ...], _KeptConfigs] = LruMemo(CONFIGS_MEMO_SIZE)


def _kept(
    key: tuple[object, ...], make: Callable[[_Memo], list[_Config]], memo: _Memo,
    workload: Workload, gpus_per_node: float, setup_hours: float | None,
) -> list[_Config]:
    """``make(memo)`` from what earlier requests kept under ``key`` (the workload without its amount
    of training), moved to ``workload``'s amount (``candidates.amounts``); the estimates it read go
    into ``memo`` either way."""
    cfgs, read, amount, moves = _entry_of(key, make, workload, gpus_per_node, setup_hours)
    moved = cfgs if amount == workload.amount() else moves.at(workload)
    if moved is None:  # these configurations do not move between amounts
        return make(memo)
    take_read(memo, read, workload)
    return moved


def _entry_of(key: tuple[object, ...], make: Callable[[_Memo], list[_Config]], workload: Workload,
              gpus_per_node: float, setup_hours: float | None) -> _KeptConfigs:
    """The ``_CONFIGS`` entry under ``key``, made by ``_kept_entry`` the first time."""
    return _CONFIGS.get_or_compute(key, partial(_kept_entry, make, workload, gpus_per_node, setup_hours))


def _kept_entry(make: Callable[[_Memo], list[_Config]], workload: Workload, gpus_per_node: float,
                setup_hours: float | None) -> _KeptConfigs:
    """What ``_CONFIGS`` keeps: ``make`` run on a memo of its own, and what moving it needs."""
    read: _Memo = {}
    cfgs = make(read)
    return cfgs, tuple(read.items()), workload.amount(), KeptMoves(cfgs, workload, gpus_per_node, setup_hours)


# Forgotten with the estimator's memos (``estimate.clear_cache``: after calibration changes).
on_clear(_CONFIGS.clear)


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class _Slot:
    """One group's offers from one provider (or all its offers, without quotas): what one kept
    entry of configurations is made for."""

    group: _Group
    provider: str | None
    members: list[Offer]
    quota: int | None
    too_many: bool  # its nodes hold more GPUs than the request allows

    def __init__(self, group: _Group, provider: str | None, members: list[Offer], quota: int | None,
                 too_many: bool) -> None:
        self.group = group
        self.provider = provider
        self.members = members
        self.quota = quota
        self.too_many = too_many


def _slots(groups: dict[_GroupKey, _Group], quotas: Mapping[str, int] | None, max_gpus: int) -> list[_Slot]:
    out: list[_Slot] = []
    for group in groups.values():
        # Quota and max-GPU limits differ by provider only through the quota, so the
        # configurations are made per provider when quotas are set.
        by_provider: dict[str | None, list[Offer]] = {None: group.offers}
        if quotas:
            by_provider = {}
            for o in group.offers:
                by_provider.setdefault(o.provider, []).append(o)
        for provider, members in by_provider.items():
            quota = quotas.get(provider) if quotas and provider else None
            out.append(_Slot(group, provider, members, quota, group.gpus_per_node > max_gpus))
    return out


def _slot_configs(
    slot: _Slot, workload: Workload, estimator: Estimator, shardings: ShardingChoices, assumptions: CostAssumptions,
    max_gpus: int, constraints: Constraints, memo: _Memo,
) -> list[_Config]:
    g = slot.group
    return _configs(
        workload, g.gpu, g.gpus_per_node, g.vram_gb, estimator=estimator, shardings=shardings,
        max_nodes=assumptions.max_nodes, max_gpus=max_gpus, quota=slot.quota, memo=memo,
        fabric=g.fabric, setup_hours=assumptions.setup_hours, margin=constraints.safety_margin,
    )


def _config_key(slot: _Slot, kept_as: object, assumptions: CostAssumptions, max_gpus: int,
                constraints: Constraints) -> tuple[object, ...]:
    """What ``_CONFIGS`` keeps a slot's configurations under."""
    g = slot.group
    return (kept_as, g.gpu, g.gpus_per_node, g.vram_gb, assumptions.max_nodes, max_gpus, slot.quota,
            g.fabric, assumptions.setup_hours, constraints.safety_margin)


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class _Layout:
    """The slots one kind of request reads and their kept configurations (``_CONFIGS`` entries), in
    order, with the estimates those read (each key's first, in the order ``take_read`` meets them)."""

    groups: dict[_GroupKey, _Group]  # held, so that no other object takes its id while this lives
    slots: list[_Slot]
    entries: list[_KeptConfigs | None]  # None: a slot with too many GPUs per node
    read: dict[_EstimateKey, Read]
    # How its entries move together once each has found the shared rows its own (``_move_plan``);
    # set by the request that finds so (any of two at once: the same plan).
    plan: _MovePlan | None = None

    def __init__(self, groups: dict[_GroupKey, _Group], slots: list[_Slot], entries: list[_KeptConfigs | None],
                 read: dict[_EstimateKey, Read], plan: _MovePlan | None = None) -> None:
        self.groups = groups
        self.slots = slots
        self.entries = entries
        self.read = read
        self.plan = plan


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class _MovePlan:
    """Where each of a layout's entries (those kept, in order) finds its moved figures among its
    workload's rows (``amount_rows.MoveRows``) as built once (``columns``): the indices of its
    moving configurations and its first row (``KeptMoves.row_plan``)."""

    rows: MoveRows
    columns: Any  # the rows' ``amount_rows._Columns`` the plan was made on
    indices: list[list[int]]
    starts: list[int]

    def __init__(self, rows: MoveRows, columns: Any, indices: list[list[int]], starts: list[int]) -> None:
        self.rows = rows
        self.columns = columns
        self.indices = indices
        self.starts = starts


def _move_plan(moves: list[KeptMoves[_Config]], w: Workload) -> _MovePlan | None:
    """The plan of ``moves`` (every kept entry of a layout, in order) on their rows for ``w``'s
    amount; None unless each would move from those rows as ``KeptMoves.at`` does, unchecked."""
    rows = moves[0].rows
    done = rows.moved(w)
    if done is None:
        return None
    columns = done[0]
    indices: list[list[int]] = []
    starts: list[int] = []
    for m in moves:
        if m.rows is not rows:
            return None
        got = m.row_plan(columns)
        if got is None:
            return None
        indices.append(got[0])
        starts.append(got[1])
    return _MovePlan(rows, columns, indices, starts)


def _planned(plan: _MovePlan, kept: list[_KeptConfigs], w: Workload) -> list[list[_Config] | None] | None:
    """What ``moved_groups`` gives the kept entries ``kept`` (the layout's, every one moving) for
    ``w``'s amount, in one pass over the rows' moved figures; None when the rows were built again
    since the plan was made (a group joined or left: the plan is made anew)."""
    done = plan.rows.moved(w)
    if done is None or done[0] is not plan.columns:
        return None
    figures: list[tuple[float, float, float, float]] = done[1]
    out: list[list[_Config] | None] = []
    for entry, idxs, start in zip(kept, plan.indices, plan.starts, strict=True):
        cfgs = list(entry[0])
        r = start
        for i in idxs:
            f0, f1, f2, f3 = figures[r]
            cfgs[i] = cfgs[i].moved(f0, f1, f2, f3)
            r += 1
        out.append(cfgs)
    return out


def _lay_out(
    groups: dict[_GroupKey, _Group], workload: Workload, kept_as: object, quotas: Mapping[str, int] | None,
    max_gpus: int, estimator: Estimator, shardings: ShardingChoices, assumptions: CostAssumptions,
    constraints: Constraints,
) -> _Layout:
    slots = _slots(groups, quotas, max_gpus)
    entries: list[_KeptConfigs | None] = []
    read: dict[_EstimateKey, Read] = {}
    for slot in slots:
        if slot.too_many:
            entries.append(None)
            continue
        make = partial(_slot_configs, slot, workload, estimator, shardings, assumptions, max_gpus, constraints)
        entry = _entry_of(_config_key(slot, kept_as, assumptions, max_gpus, constraints), make, workload,
                          slot.group.gpus_per_node, assumptions.setup_hours)
        entries.append(entry)
        for k, est in entry[1]:
            if k not in read:
                read[k] = est
    return _Layout(groups, slots, entries, read)


def _laid_out(
    layout: _Layout, workload: Workload, memo: _Memo, estimator: Estimator, shardings: ShardingChoices,
    assumptions: CostAssumptions, max_gpus: int, constraints: Constraints,
) -> list[tuple[_Group, str | None, list[Offer], list[_Config] | None]]:
    """What ``_kept`` gives each of the layout's slots, in order, with every kept entry of another
    amount moved at once (``amounts.moved_groups``, or in one pass by the layout's plan once its
    groups have found the shared rows their own) and, where every entry moved, the estimates
    they read put into an empty ``memo`` in one step: what ``take_read`` puts there slot by slot."""
    amount = workload.amount()
    kept = [e for e in layout.entries if e is not None]
    moving = [e[3] for e in kept if e[2] != amount]
    moved: list[list[_Config] | None] = []
    if moving:
        every = len(moving) == len(kept)
        plan = layout.plan
        got = _planned(plan, kept, workload) if every and plan is not None else None
        if got is not None:
            moved = got
        else:
            moved = moved_groups(moving, workload)
            # Only groups moved from the shared rows (past ``BATCH_AFTER``) have checked them.
            if every and len(moving) > BATCH_AFTER and None not in moved:
                layout.plan = _move_plan(moving, workload)
    at_once = not memo and isinstance(memo, MovingMemo) and memo.workload is workload and None not in moved
    made: list[tuple[_Group, str | None, list[Offer], list[_Config] | None]] = []
    j = 0
    for slot, entry in zip(layout.slots, layout.entries, strict=True):
        if entry is None:
            made.append((slot.group, slot.provider, slot.members, None))
            continue
        cfgs: list[_Config] | None = entry[0]
        if entry[2] != amount:
            cfgs = moved[j]
            j += 1
        if cfgs is None:  # these configurations do not move between amounts: made for this one
            cfgs = _slot_configs(slot, workload, estimator, shardings, assumptions, max_gpus, constraints, memo)
        elif not at_once:
            take_read(memo, entry[1], workload)
        made.append((slot.group, slot.provider, slot.members, cfgs))
    if at_once:
        memo.update(layout.read)
    return made


# Layouts of the last kinds of request (``_Layout``): an unrestricted quote's holds about 130 slots,
# whose entries ``_CONFIGS`` mostly holds too (about 30 workloads' worth). 32, not 16: a script that
# sweeps token counts over more jobs than the memo holds, in turn, had every job laid out anew each
# round. Over 18 jobs (bench/token_sweep.py) a quote took 3.2 against 3.8 ms (its first round cold
# included), and four clients of bench/load.py's 18 jobs got 628-635 against 602-620 quotes a second
# (2026-12-06). bench/footprint.py: 280 / 291 MB after 500 / 1,000 new models, as with 16 (279 / 290).
_LAYOUTS: LruMemo[tuple[object, ...], _Layout] = LruMemo(32)
on_clear(_LAYOUTS.clear)


# ZeRO-3 / FSDP do ZeRO-2's work plus two all-gathers of the weights per micro-step: once ZeRO-2
# fits with nothing left to gain from more memory (see ``_recipe_unconstrained``), they can only be
# slower (the estimator models the same compute for both).
_SLOWER_THAN: dict[str, set[str]] = {"zero3": {"zero2"}, "fsdp": {"zero2"}}


def _recipe_unconstrained(est: Estimate, workload: Workload) -> bool:
    """Whether the fitted recipe is already what unlimited memory would give: the whole per-GPU
    share in one micro-batch and no recomputation, as far as they were left to ``auto``. Otherwise a
    heavier scheme frees memory for a larger micro-batch and may run faster."""
    r = est.recipe
    if r is None:
        return True
    micro_free = workload.micro_batch_size == "auto" and workload.gradient_accumulation_steps is None
    if micro_free and r.gradient_accumulation_steps > 1:
        return False
    return not (workload.gradient_checkpointing == "auto" and r.gradient_checkpointing)


def _sharding_calls(workload: Workload, count: int, shardings: ShardingChoices) -> list[str | None]:
    """Estimator calls for ``count`` GPUs: every scheme allowed (under ``auto``: ddp, zero2, zero3).
    A heavier scheme is not always slower: sharding the optimizer step can pay for its traffic."""
    if count <= 1:
        return [None]
    return list(shardings(workload.sharding, count))


def _host_vcpus(members: list[Offer]) -> list[float]:
    """The distinct vCPU counts of ``members``' hosts, ascending."""
    return sorted({float(o.vcpus) for o in members if o.vcpus is not None})


def _fed_variants(cfgs: list[_Config], vcpus: list[float], gpu: str, image_size: int) -> list[_Config]:
    """Each configuration as run on the CPU-short hosts among ``vcpus`` (a group's distinct vCPU
    counts, ascending, ``_host_vcpus``): slower by what their cores (or GPU JPEG decoding) can
    feed, with a note; none below the 70 % floor (``candidates.feeding``). A variant asks for
    exactly its host's vCPUs, so larger hosts keep the full-speed configuration, which costs them less."""
    need = max((c.cores_per_node for c in cfgs), default=0.0)
    short = [v for v in vcpus if v < need]
    if not short:
        return []  # every host feeds every configuration
    out: list[_Config] = []
    for c in cfgs:
        for v in short:
            if v >= c.cores_per_node:
                break
            feed = host_feed(v, c.cores_per_node, images=c.images, gpu=gpu, image_size=image_size)
            if feed is None:
                continue
            out.append(dataclasses.replace(
                c, train_hours=c.train_hours / feed.busy_share, cores_per_node=v, warnings=(*c.warnings, feed.note),
            ))
    return out


def _in_sessions(c: _Config, limits: SubscriptionLimits) -> _Config:
    """``c`` on a subscription: split into the plan's sessions, each restart counted in the hours."""
    sp = session_plan(limits, c.train_hours, c.setup_hours)
    return dataclasses.replace(c, train_hours=c.train_hours + sp.restart_hours, warnings=(*c.warnings, sp.note))


def _host_reason(cfg: _Config, offer: Offer) -> str | None:
    if offer.ram_gb is not None and offer.ram_gb < cfg.ram_gb_per_node:
        return NO_HOST_RAM
    if offer.vcpus is not None and offer.vcpus < cfg.cores_per_node:
        return NO_HOST_CPU
    return None


def _spot_job(offer: Offer, cfg: _Config, so: spot_risk.SpotOptions) -> spot_risk.SpotJob:
    rate = spot_risk.spot_rate(offer.provider, offer.region, offer.instance_type)
    return spot_risk.SpotJob(cfg.train_hours, cfg.setup_hours, cfg.nodes, rate, cfg.checkpoint_gb, so.interval_hours)


def _egress_per_run_usd(offer: Offer, a: CostAssumptions) -> float:
    """The request's egress (GB per run) at the provider's internet egress price; 0 where unpriced."""
    if not a.egress_gb_per_run:
        return 0.0
    return a.egress_gb_per_run * (egress_usd_per_gb(offer.provider) or 0.0)


def _egress_notes(offer: Offer, a: CostAssumptions) -> tuple[str, ...]:
    if not a.egress_gb_per_run or egress_usd_per_gb(offer.provider) is not None:
        return ()
    return (f"egress not priced: no public internet egress price for {offer.provider} "
            f"({a.egress_gb_per_run:g} GB a run leave it)",)


def _cloud_candidate(
    offer: Offer, gpu: str, cfg: _Config, pricing: Pricing, runs: int, a: CostAssumptions,
    so: spot_risk.SpotOptions = spot_risk.SpotOptions(),
) -> Candidate:
    price = offer.spot_price_hour if pricing == "spot" else offer.price_hour
    assert price is not None
    # Spot: this offer's own reclaim risk (rate, notice) on this job's checkpoint and restart.
    job = _spot_job(offer, cfg, so) if pricing == "spot" else None
    spot = None
    if job is not None:
        seed = spot_risk.seed_for(offer.provider, offer.region, offer.instance_type, cfg.nodes, cfg.sharding)
        # The job's disk is billed with the instance, on spot and on the fallback alike.
        disk = (offer.storage_usd_per_gb_month or 0.0) / costs.HOURS_PER_MONTH * cfg.disk_gb_per_node
        od = offer.price_hour + disk if offer.price_hour is not None else None
        spot = spot_risk.SpotPricing(job, price + disk, od, so.deadline_hours, seed)
    rc = costs.rent_cost(
        price,
        cfg.train_hours,
        cfg.nodes,
        billing_increment_s=offer.billing_increment_s,
        min_billing_s=offer.min_billing_s,
        spot=pricing == "spot",
        setup_hours=cfg.setup_hours,
        spot_train_wall_hours=spot_risk.expected_train_wall_hours(job) if job is not None else None,
    )
    # On billed hours: the disk lives as long as the instance is billed, and the bill stays
    # (price + storage rate) x billed hours, so configurations rank the same on every offer.
    storage = costs.storage_usd(cfg.disk_gb_per_node, offer.storage_usd_per_gb_month, rc.billed_hours, cfg.nodes)
    egress = _egress_per_run_usd(offer, a)
    breakdown = rc.breakdown(runs)
    breakdown["storage_usd"] = storage * runs
    if a.egress_gb_per_run:
        breakdown["egress_usd"] = egress * runs
    # A subscription's month costs its fee however few units the runs draw.
    plan = subscription_of(offer.provider, offer.instance_type)
    per_run = rc.cost_per_run_usd + storage + egress
    floor = max(0.0, monthly_floor_usd(plan, per_run * runs) - per_run * runs) if plan else 0.0
    if plan is not None:
        breakdown["subscription_fee_floor_usd"] = floor
    return Candidate(
        key=f"{offer.provider}/{offer.region}/{offer.zone or ''}/{offer.instance_type}/{cfg.nodes}/{cfg.sharding}/{pricing}",
        kind="cloud",
        provider=offer.provider,
        region=offer.region,
        zone=offer.zone,
        instance_type=offer.instance_type,
        gpu=gpu,
        gpus_per_node=offer.gpu_count,
        nodes=cfg.nodes,
        pricing=pricing,
        hourly_usd=price * cfg.nodes,
        hours=rc.wall_hours,
        fixed_usd=floor,
        cost_per_run_usd=per_run,
        runs=runs,
        memory_need_gb_per_gpu=cfg.mem_gb,
        vram_gb_per_gpu=offer.gpu_vram_gb,
        sharding=cfg.sharding,
        breakdown=breakdown,
        source=offer.source,
        as_of=offer.as_of,
        total_gpus=cfg.total_gpus,
        recipe=cfg.recipe,
        warnings=cfg.warnings + _egress_notes(offer, a),
        spot=spot,
        basis=cfg.basis,
        measurement_id=cfg.measurement_id,
    )


@dataclass(slots=True)
class _Group:
    gpu: str
    gpus_per_node: float
    vram_gb: float
    fabric: bool = False
    offers: list[Offer] = field(default_factory=list)
    subscription: SubscriptionLimits | None = None  # a plan's limits (``optimizer.subscriptions``)
    # ``_host_vcpus(offers)``, worked out on first use: a group is kept across requests with its
    # view's offers (``_filter_offers``), and its offers do not change once grouped.
    vcpus: list[float] | None = None

    # ``_offer_tables(offers, spot)`` per spot flag, worked out on first use, likewise.
    tables: dict[bool, _OfferTables] = field(default_factory=dict)

    def host_vcpus(self) -> list[float]:
        if self.vcpus is None:
            self.vcpus = _host_vcpus(self.offers)
        return self.vcpus

    def offer_tables(self, spot: bool) -> _OfferTables:
        got = self.tables.get(spot)
        if got is None:
            got = self.tables[spot] = _offer_tables(self.offers, spot)
        return got


def _screened(o: Offer, screen: PriceScreen, allow_spot: bool, tally: RejectionTally) -> Offer | None:
    """``o`` without the prices the screen calls suspect; None (tallied) when no usable price is left."""
    od, sp = screen.reasons(o)
    if od is None and (sp is None or not allow_spot):
        return o
    price = None if od else o.price_hour
    spot = None if sp else o.spot_price_hour
    if price is None and not (allow_spot and spot is not None):
        had = o.price_hour is not None or (allow_spot and o.spot_price_hour is not None)
        tally.add((od or sp or NO_PRICE) if had else NO_PRICE, _offer_label(o))
        return None
    # Only the spot price is set aside: the offer goes on (on demand) and is counted once, as
    # feasible or by the reason it fails later, never also as rejected here.
    return o.model_copy(update={"price_hour": price, "spot_price_hour": spot})


def _frozen(names: set[str] | None) -> frozenset[str] | None:
    return None if names is None else frozenset(names)


class _Recorded:
    """A tally that keeps the order of what was added, to add it again to another."""

    def __init__(self) -> None:
        self.added: list[tuple[str, str]] = []

    def add(self, reason: str, example: str, count: int = 1) -> None:
        self.added.extend([(reason, example)] * count)


# The groups one offer list makes under one set of filters and one price screen. A view of a
# snapshot is one ``OfferList`` for as long as it is kept (``offer_groups.OfferIndex.view``), never
# changed, so a repeated kind of request (the same filters, any workload or amount) groups its
# offers once; a plain list is grouped each time. Keyed by the ids of the list and the screen:
# each entry holds both, so neither id can belong to another object while the entry lives. The
# groups are shared and never changed by their readers.
_FILTERED: LruMemo[tuple[object, ...], tuple[OfferList, PriceScreen | None,
                                             dict[_GroupKey, _Group],
                                             tuple[tuple[str, str], ...]]] = LruMemo(64)


def _filter_offers(
    offers: Iterable[Offer], constraints: Constraints, tally: RejectionTally, screen: PriceScreen | None = None
) -> dict[_GroupKey, _Group]:
    """``offers`` that pass ``constraints`` and the price screen, grouped by (GPU, GPUs per node,
    memory, fabric, plan); the others tallied with their reason. Kept per list (above)."""
    if not isinstance(offers, OfferList):
        return _grouped(offers, constraints, tally, screen)
    key = (
        id(offers), frozenset(p.lower() for p in constraints.providers) if constraints.providers else None,
        frozenset(constraints.regions) if constraints.regions else None, _frozen(_wanted_gpus(constraints)),
        constraints.allow_spot, constraints.allow_suspect_prices, id(screen),
    )
    # A partial, not a nested function: compiled, the nested function here and its closure referred
    # to each other, a cycle per request (``local_sizes.sizes_at``).
    _, _, groups, added = _FILTERED.get_or_compute(key, partial(_group, offers, constraints, screen))
    for reason, example in added:  # tallied again, in the order the filter met them
        tally.add(reason, example)
    return groups


def _group(offers: OfferList, constraints: Constraints, screen: PriceScreen | None) -> tuple[
    OfferList, PriceScreen | None, dict[_GroupKey, _Group], tuple[tuple[str, str], ...]
]:
    """What ``_FILTERED`` keeps: the list, the screen, the groups and the rejections in order."""
    recorded = _Recorded()
    groups = _grouped(offers, constraints, recorded, screen)  # type: ignore[arg-type]
    return offers, screen, groups, tuple(recorded.added)


def _grouped(
    offers: Iterable[Offer], constraints: Constraints, tally: RejectionTally, screen: PriceScreen | None = None
) -> dict[_GroupKey, _Group]:
    providers = {p.lower() for p in constraints.providers} if constraints.providers else None
    regions = set(constraints.regions) if constraints.regions else None
    gpus = _wanted_gpus(constraints)
    groups: dict[_GroupKey, _Group] = {}
    for o in offers:
        gpu = _canonical(o.gpu)
        if gpu is None:
            tally.add(UNKNOWN_GPU, _offer_label(o))
            continue
        if (
            (providers is not None and o.provider.lower() not in providers)
            or (regions is not None and o.region not in regions)
            or (gpus is not None and gpu not in gpus)
        ):
            tally.add(EXCLUDED, _offer_label(o))
            continue
        if o.price_hour is None and not (constraints.allow_spot and o.spot_price_hour is not None):
            tally.add(NO_PRICE, _offer_label(o))
            continue
        if screen is not None and not constraints.allow_suspect_prices:
            kept = _screened(o, screen, constraints.allow_spot, tally)
            if kept is None:
                continue
            o = kept
        fabric = bool(getattr(o, "inter_node_fabric", False))
        # A subscription's offers form groups of their own: its session limits change the hours.
        plan = subscription_of(o.provider, o.instance_type)
        key = (gpu, o.gpu_count, o.gpu_vram_gb, fabric, plan.plan if plan else None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(gpu, o.gpu_count, o.gpu_vram_gb, fabric, subscription=plan)
        g.offers.append(o)
    return groups


def cloud_candidates(
    workload: Workload,
    constraints: Constraints,
    offers: Iterable[Offer],
    *,
    runs: int,
    estimator: Estimator,
    shardings: ShardingChoices,
    assumptions: CostAssumptions,
    quotas: Mapping[str, int] | None,
    tally: RejectionTally,
    memo: dict[tuple[str, int, str | None], Read],
    screen: PriceScreen | None = None,
) -> tuple[list[Candidate], list[tuple[float, float, Offer, str, _Config, Pricing]], int]:
    """Config-best candidates that may be Pareto-optimal (for the ILP), per-offer best rows (for
    ranking), and the count of feasible offers."""
    deadline = constraints.deadline_hours
    budget = constraints.budget_usd
    max_gpus = min(constraints.max_gpus or MAX_TOTAL_GPUS, MAX_TOTAL_GPUS)
    # Each configuration's cheapest offer, as (cost, hours, offer, GPU, config, pricing) rows.
    config_best: list[tuple[float, float, Offer, str, _Config, Pricing]] = []
    per_offer: list[tuple[float, float, Offer, str, _Config, Pricing]] = []
    feasible_offers = 0
    pricings: list[Pricing] = ["on_demand", "spot"] if constraints.allow_spot else ["on_demand"]
    so = spot_risk.SpotOptions.of(constraints)
    reuse = kept_across_requests(estimator, shardings)
    # What the groups' configurations are kept under: the workload without its amount (the same for all).
    kept_as = amount_key(workload) if reuse else None

    # Every group's configurations first (made, or moved to this amount), then every group's
    # pricing: each kind of work runs back to back instead of alternating group by group, which
    # bench/ab_quotes.py measured 5 % faster for a new token count and for a new model (the
    # estimator's code and memos stay in the CPU's caches, presumably). The same calls in the same
    # order as one loop made, rejections tallied in the same order: the same answers.
    made: list[tuple[_Group, str | None, list[Offer], list[_Config] | None]] = []
    groups = _filter_offers(offers, constraints, tally, screen)
    slots = None
    if reuse and isinstance(offers, OfferList):
        # A kind of request asked before (the same workload but for its amount, the same view of
        # the offers and limits) reads the same groups' kept configurations: its layout keeps them
        # in order, so only moving them to this amount is left (``_laid_out``).
        quota_key = tuple(sorted(quotas.items())) if quotas else None
        lkey = (kept_as, id(groups), quota_key, max_gpus, assumptions.max_nodes, assumptions.setup_hours,
                constraints.safety_margin)
        layout = _LAYOUTS.get_or_compute(lkey, partial(
            _lay_out, groups, workload, kept_as, quotas, max_gpus, estimator, shardings, assumptions, constraints))
        made = _laid_out(layout, workload, memo, estimator, shardings, assumptions, max_gpus, constraints)
    else:
        slots = _slots(groups, quotas, max_gpus)
    for slot in slots or ():
        if slot.too_many:
            made.append((slot.group, slot.provider, slot.members, None))
            continue
        make = partial(_slot_configs, slot, workload, estimator, shardings, assumptions, max_gpus, constraints)
        kept_cfgs = (_kept(_config_key(slot, kept_as, assumptions, max_gpus, constraints), make, memo, workload,
                           slot.group.gpus_per_node, assumptions.setup_hours)
                     if reuse else make(memo))
        made.append((slot.group, slot.provider, slot.members, kept_cfgs))
    for group, provider, members, cfgs in made:
        if cfgs is None:
            for o in members:
                tally.add(TOO_MANY_GPUS, _offer_label(o))
            continue
        # Offer-independent reason of the best config-level attempt.
        base_reason: str | None = None
        for c in cfgs:
            if c.reason is not None:
                base_reason = _deeper(base_reason, c.reason)
        live = [c for c in cfgs if c.reason is None]
        if not live:
            for o in members:
                tally.add(base_reason or UNSUPPORTED, _offer_label(o))
            continue
        vcpus = group.host_vcpus() if provider is None else _host_vcpus(members)
        live = live + _fed_variants(live, vcpus, group.gpu, workload.image_size)
        if group.subscription is not None:
            live = [_in_sessions(c, group.subscription) for c in live]
        feasible_offers += _price_group(
            group.gpu, live, members, pricings, runs, deadline, budget, assumptions,
            config_best, per_offer, tally, so,
            tables=group.offer_tables("spot" in pricings) if provider is None else None,
        )
    frontier = [_cloud_candidate(o, gpu, cfg, p, runs, assumptions, so) for o, gpu, cfg, p in _frontier_rows(config_best)]
    return frontier, per_offer, feasible_offers


# Relative slack between a row's cost and hours as pricing computes them and as the candidate
# recomputes them (the same arithmetic in another order): far above float error, far below a cent.
_ROW_SLACK = 1e-7


def _frontier_rows(
    rows: list[tuple[float, float, Offer, str, _Config, Pricing]],
) -> list[tuple[Offer, str, _Config, Pricing]]:
    """The rows that may lie on the Pareto front of hours and cost (``candidates.pareto``), so only
    those become candidates: a row is left out only when another is faster by more than the
    slack and no dearer, so the exact front computed on the candidates made is the same."""
    out: list[tuple[Offer, str, _Config, Pricing]] = []
    ordered = sorted(rows, key=lambda r: (r[1], r[0]))
    cheapest_before = float("inf")  # least cost among rows faster than the current one by the slack
    j = 0
    for cost, hours, o, gpu, cfg, p in ordered:
        while j < len(ordered) and ordered[j][1] < hours * (1 - _ROW_SLACK) - _ROW_SLACK:
            cheapest_before = min(cheapest_before, ordered[j][0])
            j += 1
        if cost <= cheapest_before * (1 + _ROW_SLACK) + _ROW_SLACK:
            out.append((o, gpu, cfg, p))
    return out


# Spot rate key (rate, notice) of an offer's reclaim rate; None on demand.
_RateKey = tuple[float, float] | None
# An offer's price, its block storage per GB-hour, its host's RAM and vCPUs (inf: not stated), itself.
_Priced = tuple[float, float, float, float, Offer]


@dataclass(frozen=True, slots=True)
class _OfferTables:
    """What pricing a group reads of its offers alone, whatever the configurations: each offer's spot
    rate, the offers by billing rule (increment, minimum, rate) and, per pricing and rule, their
    prices. The same for every request on the same offers (``_Group.offer_tables``)."""

    rates: dict[int, spot_risk.SpotRate]  # id(offer) -> its reclaim rate (with spot only)
    rules: dict[tuple[int, int, _RateKey], list[Offer]]
    rate_of: dict[_RateKey, spot_risk.SpotRate | None]
    priced: dict[tuple[bool, int, int, _RateKey], list[_Priced]]  # (spot, rule) -> offers with that price


def _offer_tables(members: list[Offer], spot: bool) -> _OfferTables:
    # Spot hours depend on the offer's reclaim rate and notice (``optimizer.spot_risk``), so with
    # spot the offers are grouped by those too: within a rule every configuration costs price x factor.
    rates = {id(o): spot_risk.spot_rate(o.provider, o.region, o.instance_type) for o in members} if spot else {}
    rules: dict[tuple[int, int, _RateKey], list[Offer]] = {}
    rate_of: dict[_RateKey, spot_risk.SpotRate | None] = {}
    for o in members:
        r = rates.get(id(o))
        rk = r.key if r is not None else None
        rate_of.setdefault(rk, r)
        rules.setdefault((o.billing_increment_s, o.min_billing_s, rk), []).append(o)
    inf = float("inf")
    priced: dict[tuple[bool, int, int, _RateKey], list[_Priced]] = {}
    for (inc, mn, rk), offs in rules.items():
        for p_spot in ((False, True) if spot else (False,)):
            # Block storage is billed over the same hours as the instance, so an offer's hourly
            # rate for config i is its price plus the job's disk at its storage rate.
            rows: list[_Priced] = []
            for o in offs:
                price = o.spot_price_hour if p_spot else o.price_hour
                if price is not None:
                    disk_rate = (o.storage_usd_per_gb_month or 0.0) / costs.HOURS_PER_MONTH
                    rows.append((price, disk_rate, inf if o.ram_gb is None else o.ram_gb,
                                 inf if o.vcpus is None else o.vcpus, o))
            priced[(p_spot, inc, mn, rk)] = rows
    return _OfferTables(rates, rules, rate_of, priced)


def _price_group(
    gpu: str,
    cfgs: list[_Config],
    members: list[Offer],
    pricings: list[Pricing],
    runs: int,
    deadline: float | None,
    budget: float | None,
    a: CostAssumptions,
    config_best: list[tuple[float, float, Offer, str, _Config, Pricing]],
    per_offer: list[tuple[float, float, Offer, str, _Config, Pricing]],
    tally: RejectionTally,
    so: spot_risk.SpotOptions = spot_risk.SpotOptions(),
    tables: _OfferTables | None = None,
) -> int:
    """Price every offer of one group; returns how many offers had a feasible configuration.
    ``tables``: ``_offer_tables(members, "spot" in pricings)``, when the caller keeps them.

    The cost of config i on offer o is ``price(o) * nodes(i) * billed(wall(i), rule(o))``: for one
    billing rule the configurations rank the same on every offer. So each offer walks that ranking
    and stops at the first configuration its host can take (costs only rise from there, so a
    budget miss ends the walk too); each configuration walks the offers by price likewise.
    """
    t = tables if tables is not None else _offer_tables(members, "spot" in pricings)
    rates, rules, rate_of = t.rates, t.rules, t.rate_of
    n = len(cfgs)
    # Each configuration's wall hours per (pricing, spot rate): on demand, its setup and training;
    # on spot, its training lengthened by the offer's reclaims (``spot_walls``, compiled with this
    # module: ``spot_risk.train_wall_hours`` without a call into Python per configuration).
    plain = [c.setup_hours + c.train_hours for c in cfgs]
    walls: dict[tuple[Pricing, _RateKey], list[float]] = {}
    interval = so.interval_hours
    for rk, r in rate_of.items():
        on_spot = plain
        if r is not None and "spot" in pricings:
            per_hour, warning = r.interruptions_per_hour, r.warning_hours
            on_spot = [
                c.setup_hours + wall_hours(c.train_hours, c.setup_hours, c.nodes, per_hour, warning,
                                           c.checkpoint_gb, interval)
                for c in cfgs
            ]
        for p in pricings:
            walls[(p, rk)] = on_spot if p == "spot" else plain

    best_of: dict[int, tuple[float, float, int, Pricing]] = {}  # id(offer) -> (cost, hours, cfg, pricing)
    best_for_cfg: dict[tuple[int, Pricing], tuple[float, Offer, float]] = {}
    inf = float("inf")
    cap_budget = inf if budget is None else budget
    for p in pricings:
        spot = p == "spot"
        for (inc, mn, rk), offs in rules.items():
            wall = walls[(p, rk)]
            # Per config on time, in cost order: (index, cost factor, RAM, vCPUs and disk a node
            # needs, hours); a stable sort, so configurations that tie keep their order.
            steps = [
                (i, costs.billed_hours(wall[i], inc, mn) * c.nodes * runs, c.ram_gb_per_node, c.cores_per_node,
                 wall[i], c.disk_gb_per_node)
                for i, c in enumerate(cfgs) if deadline is None or wall[i] <= deadline
            ]
            if not steps:
                continue
            if len(steps) > 1:
                steps.sort(key=_factor_and_hours)
            priced = t.priced[(spot, inc, mn, rk)]
            # Egress is paid per run whatever the configuration: the same for every step of an offer.
            egress_of = {id(o): _egress_per_run_usd(o, a) * runs for o in offs} if a.egress_gb_per_run else {}
            for price, disk_rate, ram, cpu, o in priced:
                for i, f, need_ram, need_cpu, hours, disk in steps:
                    if ram < need_ram or cpu < need_cpu:
                        continue
                    cost = (price + disk_rate * disk) * f + egress_of.get(id(o), 0.0)
                    if cost <= cap_budget:
                        cur = best_of.get(id(o))
                        if cur is None or cost < cur[0] or (cost == cur[0] and hours < cur[1]):
                            best_of[id(o)] = (cost, hours, i, p)
                    break  # later configurations of this offer only cost more
            for i, f, need_ram, need_cpu, cfg_hours, disk in steps:
                # The cheapest offer whose host takes the configuration, the first one on ties: what
                # walking them in (stable) cost order finds first, in one pass.
                found: Offer | None = None
                cost = inf
                for price, disk_rate, ram, cpu, o in priced:
                    if ram < need_ram or cpu < need_cpu:
                        continue
                    c = (price + disk_rate * disk) * f + egress_of.get(id(o), 0.0)
                    if found is None or c < cost:
                        found, cost = o, c
                if found is not None and cost <= cap_budget:
                    prev = best_for_cfg.get((i, p))
                    if prev is None or cost < prev[0]:
                        best_for_cfg[(i, p)] = (cost, found, cfg_hours)

    feasible = 0
    for o in members:
        best = best_of.get(id(o))
        if best is None:
            rk = rates[id(o)].key if id(o) in rates else None
            own = {(i, p): walls[(p, rk)][i] for i in range(n) for p in pricings}
            tally.add(_offer_reason(o, cfgs, pricings, own, deadline), _offer_label(o))
            continue
        feasible += 1
        per_offer.append((best[0], best[1], o, gpu, cfgs[best[2]], best[3]))
    for (i, p), (cost, o, cfg_hours) in best_for_cfg.items():
        config_best.append((cost, cfg_hours, o, gpu, cfgs[i], p))
    return feasible


def _factor_and_hours(step: tuple[int, float, float, float, float, float]) -> tuple[float, float]:
    return step[1], step[4]


def _offer_reason(
    o: Offer,
    cfgs: list[_Config],
    pricings: list[Pricing],
    wall: Mapping[tuple[int, Pricing], float],
    deadline: float | None,
) -> str:
    """Why no configuration of this offer works: the deepest check any configuration reached."""
    reason: str | None = None
    for p in pricings:
        if (o.spot_price_hour if p == "spot" else o.price_hour) is None:
            reason = _deeper(reason, NO_PRICE)
            continue
        for i, c in enumerate(cfgs):
            r = _host_reason(c, o)
            if r is None:
                r = LATE if deadline is not None and wall[(i, p)] > deadline else OVER_BUDGET
            reason = _deeper(reason, r)
    return reason or NO_PRICE
