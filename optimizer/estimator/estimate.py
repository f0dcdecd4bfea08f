"""One estimate: does the job fit on ``gpu_count`` x ``gpu``, how fast, how long, what host.

``estimate`` is called for every distinct (GPU, count, sharding) of a quote, about 140 times for an
unrestricted one, so results are memoized (``_FITTED``) on ``Workload.rate_key()``: the workload
without its amount of training, which ``amounts.at_amount`` applies afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from optimizer.errors import GpucostError, InvalidInput
from optimizer.estimator import recipe as rcp
from optimizer.estimator.amounts import BASIS_KEY, AmountBasis, at_amount
from optimizer.estimator.amounts import figures as amount_figures
from optimizer.estimator.construct import constructed, replaced
from optimizer.estimator.gpus import GpuSpec, canonical_gpu, gpu_spec
from optimizer.estimator.host import HostDetail, forget_host_parts, host_notes
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.memory import GB, MemoryParts, fused_attention_available, memory_parts
from optimizer.estimator.precision import with_precision
from optimizer.estimator.ranges import (
    capacity_warnings,
    memory_width,
    rounded,
    span,
    throughput_width,
)
from optimizer.estimator.shapes import ModelShape, resolve_model
from optimizer.estimator.support import check_supported
from optimizer.estimator.throughput import Throughput, forget_step_terms, throughput
from optimizer.estimator.workload import Workload
from optimizer.results import SHOWN_KEY, Estimate, MemoryBreakdown, Recipe

# Lightest first: each step shards more state at the price of more communication.
AUTO_ORDER = ("ddp", "zero2", "zero3")
GIB_PER_GB = 2**30 / 1e9


def usable_vram_gb(gpu: GpuSpec) -> float:
    """What an estimate may use: the card's nominal size read as GB (1e9 B).

    Marketed sizes are binary (a "24 GB" card holds 24 GiB = 25.8 GB); the ~7% difference is kept
    as headroom for the driver, other processes and allocator spikes the estimate does not see.
    """
    return gpu.vram_gb


def resolve_sharding(workload_sharding: str, gpu_count: int) -> list[str]:
    """Sharding schemes a candidate with ``gpu_count`` GPUs may use, lightest first."""
    if gpu_count <= 1:
        return ["ddp"]
    if workload_sharding == "auto":
        return list(AUTO_ORDER)
    return [workload_sharding]


def _round(x: float, nd: int = 3) -> float:
    return rounded(x, nd)


# A shape's public figures, shared by its estimates: those of the last shape asked (an
# ``lru_cache`` hashed the shape's ~25 fields for each of a quote's ~130 estimates).
_LAST_PUBLIC: tuple[ModelShape | None, dict[str, object]] = (None, {})


def _public(shape: ModelShape) -> dict[str, object]:
    global _LAST_PUBLIC
    last = _LAST_PUBLIC
    if last[0] is shape:
        return last[1]
    figures = shape.public()
    _LAST_PUBLIC = (shape, figures)
    return figures


# What an estimate reads of one memory model whatever the card: its breakdown, the peak and what
# surely exists in GB, the range around the peak, and the parts and phases its details show.
# ``_memory`` hands every card with the same attention kernel the same ``MemoryParts`` (made for one
# workload without its amount), so a quote's estimates on dozens of card types compute these once.
# Keyed by the object's id; the entry holds the object, so an id reused after it is freed never hits.
# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class _MemoryView:
    mem: MemoryParts
    breakdown: MemoryBreakdown
    total_gb: float
    width: float  # ``ranges.memory_width``
    range: list[float]  # never mutated: estimates share it
    parts_gb: dict[str, float]  # never mutated: estimates share it
    phases_gb: dict[str, float]  # never mutated: estimates share it

    def __init__(
        self, mem: MemoryParts, breakdown: MemoryBreakdown, total_gb: float, width: float, range: list[float],
        parts_gb: dict[str, float], phases_gb: dict[str, float],
    ) -> None:
        self.mem = mem
        self.breakdown = breakdown
        self.total_gb = total_gb
        self.width = width
        self.range = range
        self.parts_gb = parts_gb
        self.phases_gb = phases_gb


_VIEWS: dict[int, _MemoryView] = {}
_VIEWS_MAX = 8192


def _memory_view(shape: ModelShape, w: Workload, mem: MemoryParts) -> _MemoryView:
    hit = _VIEWS.get(id(mem))
    if hit is not None and hit.mem is mem:
        return hit
    if len(_VIEWS) >= _VIEWS_MAX:
        _VIEWS.clear()
    total_gb = mem.total / GB
    width = memory_width(shape, w, mem.logits_bytes / mem.total if mem.total else 0.0)
    states_gb = (mem.weights + mem.gradients + mem.optimizer) / GB
    view = _VIEWS[id(mem)] = _MemoryView(
        mem=mem,
        breakdown=_breakdown(mem),
        total_gb=total_gb,
        width=width,
        range=span(total_gb, width, floor=states_gb),
        parts_gb={
            "logits": mem.logits / GB,
            "temporary": mem.temporary / GB,
            "saved_activations": mem.activations / GB,
            "cuda_context": mem.context / GB,
            "fragmentation": mem.fragmentation / GB,
            "allocated_peak": mem.allocated_peak / GB,
            "offloaded_to_host": mem.host_offload / GB,
        },
        # Allocated bytes (GB) at each phase's peak; the estimate's peak is the largest.
        phases_gb={name: b / GB for name, b in mem.phases},
    )
    return view


def _breakdown(mem: MemoryParts) -> MemoryBreakdown:
    total = _round(mem.total / GB)
    return constructed(
        MemoryBreakdown,
        weights=_round(mem.weights / GB),
        gradients=_round(mem.gradients / GB),
        optimizer=_round(mem.optimizer / GB),
        # Logits and transient buffers of the peak phase are activation-sized working memory.
        activations=_round((mem.activations + mem.logits + mem.temporary) / GB),
        overhead=_round(mem.overhead / GB),
        total_per_gpu=total,
        allocator_peak=_round(mem.allocated_peak / GB),
        nvidia_smi=total,
    )


def _check_vision(shape: ModelShape, w: Workload) -> None:
    if not shape.is_vision:
        return
    if shape.arch == "cnn" and w.method != "full":
        raise InvalidInput("workload.method", f"{shape.name} is a convolutional network: LoRA/QLoRA adapt "
                           "linear layers of transformers; use method full")
    for name in ("tokens", "dataset_tokens"):
        if getattr(w, name) is not None:
            raise InvalidInput(f"workload.{name}", "image models count training in samples (images) or "
                               "dataset_samples with epochs, not tokens")


def _warnings(w: Workload, gpu: GpuSpec, host: HostDetail, emulated: bool,
              total_gb: float, high_gb: float, usable: float) -> list[str]:
    out = capacity_warnings(total_gb, high_gb, usable, gpu.name)
    if emulated:
        out.append(f"{gpu.name} has no bf16 tensor cores: bf16 is emulated at the fp32 rate (priced so); "
                   "fp16 with loss scaling runs on its tensor cores")
    if gpu.generation == "other":
        out.append(f"{gpu.name}: no published training sweep for its architecture; priced at a conservative "
                   "share of its peak, and the speed range is wide")
    if w.stack != "hf":
        out.append(f"stack {w.stack}: its memory and speed factors are priors from how it works, not fits "
                   "to published runs; the ranges are wider")
    if w.offload != "none":
        out.append(
            f"offload {w.offload}: {host.ram_parts_gb.get('offloaded_states', 0.0):.0f} GB per node in host RAM; "
            "the step waits for the host's optimizer (CPU-Adam) and PCIe copies"
        )
    return out


def _one(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str,
         found: tuple[MemoryParts, Throughput] | None = None, recipe: Recipe | None = None) -> Estimate:
    """The estimate of the concrete recipe ``w`` under ``sharding``; ``found``: its memory model and
    throughput, when the recipe search already computed them; ``recipe``: what running ``w`` means."""
    _check_vision(shape, w)
    if found is None:
        mem = _memory(shape, w, gpu, gpu_count, sharding)
        tp = throughput(shape, w, gpu, gpu_count, sharding, mem)
    else:
        mem, tp = found
    # What depends on the amount of training (hours, FLOPs, the dataset's RAM and disk), computed
    # as ``amounts.at_amount`` computes it for another amount from the same basis.
    basis = AmountBasis(shape, w, mem, tp, gpu_count, sharding)
    fig = amount_figures(basis)
    hours, hour_parts, host = fig.hours, fig.hour_parts, fig.host
    usable = usable_vram_gb(gpu)
    # The memory model's figures are the same on every card sharing it (``_memory_view``).
    view = _memory_view(shape, w, mem)
    total_gb = view.total_gb
    fits = total_gb <= usable
    emulated = w.precision in ("bf16", "bf16-true") and not gpu.supports_bf16
    mem_w = view.width
    tput_w = throughput_width(shape, w, gpu_count, emulated, unknown_arch=gpu.generation == "other")
    mem_range = view.range
    tps_range = span(tp.tokens_per_second, tput_w)

    notes: list[str] = []
    if not fits:
        notes.append(
            f"needs {total_gb:.1f} GB per GPU but {gpu.name} holds {usable:.1f} GB"
            + ("; more GPUs under DDP do not help (each holds a full copy)" if sharding == "ddp" else "")
        )
    if w.flash_attention and not mem.flash_attention and not shape.arch == "cnn":
        notes.append(
            f"{gpu.name}: no fused attention kernel for this precision and head size (FlashAttention-2 needs "
            f"Ampere+; memory-efficient SDPA needs fp16/fp32 and head sizes divisible by 8): attention "
            f"scores are kept, {w.seq_len}x{w.seq_len} per head"
        )
    if w.method == "qlora" and w.precision in ("fp32", "tf32"):
        notes.append("QLoRA computes in 16 bits; fp32 precision only changes adapter and activation sizes")
    notes.extend(host_notes(host))
    warnings = _warnings(w, gpu, host, emulated, total_gb, mem_range[1], usable)

    # model_construct (``constructed``: the same, faster): every value here is already of its
    # field's type, and this runs hundreds of times per quote. The keywords follow the fields'
    # order, so that their dict becomes the estimate's own.
    return constructed(
        Estimate,
        params=shape.params,
        trainable_params=mem.trainable_params,
        memory_gb=view.breakdown,
        gpu=gpu.name,
        gpu_count=gpu_count,
        gpu_vram_gb=gpu.vram_gb,
        fits=fits,
        sharding=sharding,
        train_flops=fig.train_flops,
        tokens_per_second=_round(tp.tokens_per_second, 1),
        mfu=_round(tp.mfu, 4),
        hours=hours,
        host=host.needs,
        notes=tuple(notes),
        # Detail figures are rounded when serialised (Estimate.details), not here: this runs
        # hundreds of times per quote and most details are never shown. Those that only the
        # estimate's reader sees (nothing here computes with them) are made when it is shown
        # (``ShownDetails``); the rest are shared with the memory model or read by the candidates.
        details={
            "model": _public(shape),
            "usable_vram_gb": usable,
            "stack": w.stack,
            "memory_parts_gb": view.parts_gb,
            "memory_phases_gb": view.phases_gb,
            "peak_phase": mem.peak_phase,
            "zero_stage": mem.stage,
            "flash_attention": mem.flash_attention,
            "gpu_generation": gpu.generation,
            "hours_parts": hour_parts,  # a dict of its own (``amounts.figures`` made it)
            "host_ram_parts_gb": host.ram_parts_gb,
            "host_disk_parts_gb": host.disk_parts_gb,
            "dataloader_workers": host.dataloader_workers,
            "host_feed": {"unit": host.feed_unit, "per_second_per_node": host.feed_per_second_per_node,
                          "per_core": host.feed_per_core, "cores_for_70pct_busy": host.needs.cpu_cores,
                          "cores_full_feed": host.cores_full_feed},
            BASIS_KEY: basis,
            SHOWN_KEY: ShownDetails(gpu, tp, sharding, mem_w, tput_w),
        },
        samples_per_second=_round(tp.samples_per_second, 2),
        range={"total_per_gpu": mem_range, "tokens_per_second": tps_range,
               "samples_per_second": span(tp.samples_per_second, tput_w)},
        warnings=tuple(warnings),
        recipe=recipe,
        suggestions=(),
    )


# The order the details are shown in, as the estimator wrote them before some were made when shown.
DETAIL_ORDER = (
    "model", "usable_vram_gb", "physical_vram_gb", "stack", "memory_parts_gb", "memory_phases_gb",
    "peak_phase", "zero_stage", "range_widths", "flash_attention", "model_flops_per_token",
    "hardware_flops_per_token", "peak_tflops_per_gpu", "matmul_efficiency", "gpu_generation",
    "step_seconds", "hours_parts", "host_ram_parts_gb", "host_disk_parts_gb", "dataloader_workers",
    "host_feed", "sharding_tried",
)


class ShownDetails:
    """An estimate's detail figures that no computation reads, only a reader of the estimate: the
    step's seconds by part, FLOPs per token, the card's peak and matmul efficiency, the range
    widths, the physical VRAM and the sharding tried. A new model's quote makes ~130 estimates and
    shows a handful, so these 14 floats, two dicts and a list per estimate are made when it is
    shown (``figures``), from the throughput and card the estimate was computed with (both kept by
    the estimate anyway: the throughput in its basis, the card in the catalog)."""

    def __init__(self, gpu: GpuSpec, tp: Throughput, sharding: str, mem_width: float, tput_width: float) -> None:
        self.gpu = gpu
        self.tp = tp
        self.sharding = sharding
        self.mem_width = mem_width
        self.tput_width = tput_width

    def figures(self) -> dict[str, object]:
        tp = self.tp
        return {
            "physical_vram_gb": self.gpu.vram_gb * GIB_PER_GB,
            "range_widths": {"memory": self.mem_width, "throughput": self.tput_width},
            "model_flops_per_token": tp.model_flops_per_token,
            "hardware_flops_per_token": tp.hardware_flops_per_token,
            "peak_tflops_per_gpu": tp.peak_tflops,
            "matmul_efficiency": tp.matmul_efficiency,
            "step_seconds": {
                "compute": tp.compute_seconds,
                "memory_bound": tp.memory_seconds,
                "launch": tp.dispatch_seconds,
                "per_step_overhead": tp.step_overhead_seconds,
                "offload": tp.offload_seconds,
                "communication": tp.comm_seconds,
                "total": tp.step_seconds,
            },
            "sharding_tried": [self.sharding],
        }

    def merged(self, details: dict[str, object]) -> dict[str, object]:
        """``details`` with these figures, in the estimator's order; a key ``details`` holds itself
        (a measurement's ``hours_parts``, say) wins, and keys of its own follow."""
        made = self.figures()
        out: dict[str, object] = {}
        for key in DETAIL_ORDER:
            if key in details:
                out[key] = details[key]
            elif key in made:
                out[key] = made[key]
        for key, value in details.items():
            if key not in out and key != SHOWN_KEY:
                out[key] = value
        return out

    def __eq__(self, other: object) -> bool:
        # Two estimates compare their details by what they show, as they did when these were made.
        return isinstance(other, ShownDetails) and self.figures() == other.figures()


# An estimate with its details holds ~10-15 KB: bench/footprint.py saw the server grow by 690 MB over
# 200 distinct quotes with 65,536 slots per memo, when two memos held estimates; 8,192 each bounded
# both near 200 MB. One holds them now (``_FITTED``). The least recently used entry goes first, so
# the estimates of recent requests stay.
MEMO_SIZE = 8192


def estimate(
    workload: Workload, gpu: str, gpu_count: int = 1, sharding: str | None = None, *, suggest: bool = False
) -> Estimate:
    """Predicted memory, speed, time and host needs of ``workload`` on ``gpu_count`` x ``gpu``.

    ``sharding`` None uses ``workload.sharding``; ``"auto"`` takes the lightest scheme that fits
    (one GPU: plain data parallel; several: ddp, then zero2, then zero3). A micro-batch or
    checkpointing of ``auto`` is chosen per GPU type and count (``optimizer.estimator.recipe``);
    the estimate's ``recipe`` says what was assumed. ``suggest``: when nothing fits, list changes
    that do fit, each checked by estimating it.
    """
    canon, scheme = _asked(workload, gpu, gpu_count, sharding)
    # Estimates are frozen models shared through the cache; nothing copies them.
    est = _estimated(workload, canon, gpu_count, scheme)
    if suggest and not est.fits:
        from optimizer.estimator.suggestions import suggestions

        found = suggestions(workload, canon, gpu_count, scheme, _estimated)
        est = est.model_copy(update={"suggestions": tuple(found)})
    return est


_FITTED: LruMemo[tuple[str, str, int, str], Estimate | Unfit] = LruMemo(MEMO_SIZE)


def estimate_or_unfit(workload: Workload, gpu: str, gpu_count: int, sharding: str | None) -> Estimate | Unfit:
    """``estimate(workload, gpu, gpu_count, sharding)``, or only ``Unfit`` where it would say that no
    allowed recipe fits under the one scheme asked (found as the estimate finds it, without making
    it): for option generation, which rejects such a configuration for its memory and reads nothing
    else of it. The same errors as ``estimate``. A new model's quote meets a dozen such cards and
    counts (a full fine-tune on small cards); their estimates took the longest (the recipe search
    tried every recipe, then the estimate of the one needing least memory was made)."""
    canon, scheme = _asked(workload, gpu, gpu_count, sharding)
    return _fitted_cached(workload, canon, gpu_count, scheme, unfit_ok=True)


def _asked(workload: Workload, gpu: str, gpu_count: int, sharding: str | None) -> tuple[str, str]:
    """The card's name and the scheme ``estimate`` is asked for, the request checked first: names
    are resolved before the memo, so that bad input fails with the right field."""
    if gpu_count < 1:
        raise InvalidInput("gpu_count", "must be at least 1")
    scheme = _scheme(workload, sharding)
    resolve_model(workload.model)
    canon = canonical_gpu(gpu)
    check_supported(workload, gpu_spec(canon))
    return canon, scheme


def _scheme(workload: Workload, sharding: str | None) -> str:
    """The scheme ``estimate`` is asked for: ``sharding``, else the workload's."""
    scheme = sharding or workload.sharding
    if scheme == "none":  # "no sharding" as some callers spell it
        scheme = "ddp"
    if scheme not in ("ddp", "zero1", "zero2", "zero3", "fsdp", "auto"):
        raise InvalidInput("sharding", f"unknown sharding {scheme!r}")
    return scheme


def _fitted_cached(w: Workload, gpu_name: str, gpu_count: int, scheme: str, unfit_ok: bool = False) -> Estimate | Unfit:
    """The estimate with its recipe fitted, memoised (bounded) on the workload as asked but for
    its amount of training (``Workload.rate_key``): a new token count only recomputes the run's
    hours, FLOPs and dataset needs (``optimizer.estimator.amounts``). ``unfit_ok``: ``Unfit`` may
    stand for an estimate that fits no recipe (``estimate_or_unfit``); the memo may then hold it,
    and a later caller without ``unfit_ok`` makes the estimate in its place."""
    key = (w.rate_key(), gpu_name, gpu_count, scheme)
    est = _FITTED.get_or_compute(key, lambda: _fitted(w, gpu_name, gpu_count, scheme, unfit_ok))
    if isinstance(est, Unfit):
        if unfit_ok:
            # What moving an estimate to ``w``'s amount checks (``at_amount``): an image model
            # asked in tokens is refused, whichever amount the memo's entry was made for.
            _check_vision(resolve_model(w.model), w)
            return est
        est = _fitted(w, gpu_name, gpu_count, scheme)
        _FITTED.put(key, est)
    assert isinstance(est, Estimate)  # without ``unfit_ok``, ``_fitted`` makes the estimate
    return at_amount(est, w, _check_vision)


def _estimated(w: Workload, gpu_name: str, gpu_count: int, scheme: str) -> Estimate:
    """``_fitted_cached`` without ``unfit_ok``: always the estimate."""
    est = _fitted_cached(w, gpu_name, gpu_count, scheme)
    assert isinstance(est, Estimate)  # an Unfit is only handed to who asks for one
    return est


def _fitted(w: Workload, gpu_name: str, gpu_count: int, scheme: str, unfit_ok: bool = False) -> Estimate | Unfit:
    """The lightest scheme under which some allowed recipe fits (each scheme runs its fastest
    fitting recipe), else the scheme needing the least memory. ``precision: "auto"`` is resolved
    for the card first (``optimizer.estimator.precision``) and reported as chosen in the recipe.
    ``unfit_ok``: ``Unfit`` where one scheme is asked and no recipe fits under it."""
    cw = with_precision(w, gpu_spec(gpu_name))
    chose_precision = w.precision == "auto"
    schemes = resolve_sharding(scheme, gpu_count)
    results: list[Estimate] = []
    for s in schemes:
        est = _fit_scheme(cw, gpu_name, gpu_count, s, chose_precision, unfit_ok and len(schemes) == 1)
        if isinstance(est, Unfit) or est.fits:
            return est
        results.append(est)
    return min(results, key=lambda e: e.memory_gb.total_per_gpu)


# Whether a card runs fused attention for a precision and head size (what the kernel choice reads);
# emptied when full (head sizes come from requests).
_FUSED: dict[tuple[str, bool, str, str, int], bool] = {}
_FUSED_MAX = 65536


def _fused(shape: ModelShape, w: Workload, gpu: GpuSpec) -> bool:
    """Whether ``gpu`` runs fused attention for ``w`` (memoised: the recipe search asks per trial)."""
    fk = (gpu.name, w.flash_attention, w.precision, w.stack, shape.attn_head_dim)
    fused = _FUSED.get(fk)
    if fused is None:
        if len(_FUSED) >= _FUSED_MAX:
            _FUSED.clear()
        fused = _FUSED[fk] = fused_attention_available(gpu, w, shape.attn_head_dim)
    return fused


# The memory model of one concrete recipe (``w`` with its micro-batch, checkpointing and precision
# fixed), memoised without the amount of training: it is the same on every card with the same
# attention kernel (see ``_peak_gb``), so a quote over dozens of card types computes each once.
# Bounded like the estimates it is part of. (A card's throughput is its own: ``_fit_scheme`` hands
# the figure its recipe search computed to the estimate of the winner, with no memo between.)
SPEED_MEMO_SIZE = 4096
_PARTS: LruMemo[tuple[str, int, str, bool], MemoryParts] = LruMemo(SPEED_MEMO_SIZE)


def _memory(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str) -> MemoryParts:
    if w.precision == "auto":  # resolved per card inside: not shared
        return memory_parts(shape, w, gpu, gpu_count, sharding)
    key = (w.rate_key(), gpu_count, sharding, _fused(shape, w, gpu))
    return _PARTS.get_or_compute(key, lambda: memory_parts(shape, w, gpu, gpu_count, sharding))


def memory_model(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str) -> MemoryParts:
    """``memory.memory_parts`` of ``w``, shared by every card with ``gpu``'s attention kernel
    (``_memory``): for callers that ask it of every card type, as the rentals' cost floors do."""
    return _memory(shape, w, gpu, gpu_count, sharding)


def _peak_gb(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str) -> float:
    """Peak GB per GPU, shared by every GPU type with the same attention kernel: the memory model
    depends on the card only through ``fused_attention_available`` (a unit test holds it to
    that), so a quote's recipe search over dozens of card types evaluates each micro-batch once."""
    # The memory model the estimate of the winning recipe reads too (``_memory``): one memo for both.
    return _memory(shape, w, gpu, gpu_count, sharding).total / GB


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class _Searched:
    """A recipe search's outcome and the usable memory over which it holds: the search compares
    peaks with the card's usable memory and nothing else, so a card with at least the largest
    peak that fitted and less than the smallest peak that did not is searched the same way."""

    low: float  # the largest peak that fitted (-inf: none did)
    high: float  # the smallest peak that did not fit (inf: none)
    trials: tuple[rcp.Trial, ...]

    def __init__(self, low: float, high: float, trials: tuple[rcp.Trial, ...]) -> None:
        self.low = low
        self.high = high
        self.trials = trials


# The recipes that fit (``recipe.fitting_trials``) per workload, GPU count, scheme and attention
# kernel, each with the range of usable memory it holds for: a new model's unrestricted quote
# searched 76 times for its 39 card types and 5 GPU counts when every usable memory had its own
# search, and 20 times now. Bounded like the memory models the search reads, and to
# MAX_SEARCH_RANGES outcomes per key.
_TRIALS: LruMemo[tuple[str, int, str, bool], list[_Searched]] = LruMemo(SPEED_MEMO_SIZE)
MAX_SEARCH_RANGES = 64


def _fitting_trials(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str,
                    usable: float) -> tuple[rcp.Trial, ...]:
    """``recipe.fitting_trials`` of ``w`` on a card with ``usable`` GB, from an earlier search
    where one holds for that much memory (``_Searched``)."""
    searched = _TRIALS.get_or_compute((w.rate_key(), gpu_count, sharding, _fused(shape, w, gpu)), list)
    for s in searched:
        if s.low <= usable < s.high:
            return s.trials
    low, high = -math.inf, math.inf

    def fits(cw: Workload) -> bool:
        nonlocal low, high
        peak = _peak_gb(shape, cw, gpu, gpu_count, sharding)
        if peak <= usable:
            low = max(low, peak)
            return True
        high = min(high, peak)
        return False

    trials = tuple(rcp.fitting_trials(w, gpu_count, sharding, fits))
    if len(searched) < MAX_SEARCH_RANGES:
        searched.append(_Searched(low, high, trials))
    return trials


def _fit_scheme(w: Workload, gpu_name: str, gpu_count: int, scheme: str, chose_precision: bool = False,
                unfit_ok: bool = False) -> Estimate | Unfit:
    """The fastest allowed recipe that fits under one sharding scheme (or the least-memory one;
    with ``unfit_ok``, only ``Unfit`` where no recipe's memory fits the card)."""
    shape = resolve_model(w.model)
    gpu = gpu_spec(gpu_name)
    sharding = resolve_sharding(scheme, gpu_count)[0]
    usable = usable_vram_gb(gpu)

    # The memory model and throughput of each trial the search compared, for the estimate of the
    # one it keeps; keyed by the trial's workload object, which ``trials`` holds while this runs.
    found: dict[int, tuple[MemoryParts, Throughput]] = {}

    def speed(t: rcp.Trial) -> float:
        mem = _memory(shape, t.workload, gpu, gpu_count, sharding)
        tp = throughput(shape, t.workload, gpu, gpu_count, sharding, mem)
        found[id(t.workload)] = (mem, tp)
        return tp.tokens_per_second

    def one(t: rcp.Trial) -> Estimate:
        # The request said "auto": the recipe says which precision it chose.
        recipe = _precision_chosen(t.recipe) if chose_precision else t.recipe
        return _one(shape, t.workload, gpu, gpu_count, sharding, found.get(id(t.workload)), recipe)

    # Which recipes fit depends on the card only through its usable memory and its attention
    # kernel (``_peak_gb``): cards alike in both share one search.
    trials = list(_fitting_trials(shape, w, gpu, gpu_count, sharding, usable))
    if len(trials) > 1:
        # With and without recomputation both fit (at different micro-batches): the faster runs.
        trials.sort(key=speed, reverse=True)
    for t in trials:
        est = one(t)
        if est.fits:
            return est
    least = rcp.least_memory_trial(w, gpu_count, sharding)
    if unfit_ok and not trials:
        nothing = _unfit(shape, least, gpu, gpu_count, sharding, usable, chose_precision)
        if nothing is not None:
            return nothing
    return one(least)


def _unfit(shape: ModelShape, least: rcp.Trial, gpu: GpuSpec, gpu_count: int, sharding: str, usable: float,
           chose_precision: bool) -> Unfit | None:
    """``Unfit`` where the estimate ``_fit_scheme`` makes of ``least`` (its recipe needing the least
    memory, when no recipe fits) would not fit: that is its memory view's alone. Apart from
    ``_fit_scheme``: written inside it, the compiled function kept its nested ``one`` and ``speed``
    in the environment they share, a reference cycle a call (``tests/integration/test_native.py``)."""
    _check_vision(shape, least.workload)  # what ``_one`` checks first
    if _memory_view(shape, least.workload, _memory(shape, least.workload, gpu, gpu_count, sharding)).total_gb <= usable:
        return None
    return Unfit(sharding, _precision_chosen(least.recipe) if chose_precision else least.recipe)


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class Unfit:
    """What ``estimate`` says of a card, count and scheme on which no allowed recipe fits, without
    the estimate: the scheme and the recipe it would show (the one needing the least memory).
    Option generation rejects such a configuration for its memory and reads nothing else of it."""

    sharding: str
    recipe: Recipe

    def __init__(self, sharding: str, recipe: Recipe) -> None:
        self.sharding = sharding
        self.recipe = recipe


# A searched recipe with "precision" among what was chosen, per recipe (by id, the recipe held):
# every card a search serves shares its recipes (``_Searched``), so a new model's ~130 estimates
# make a few dozen copies instead of one each. Recipes are frozen; estimates share them.
_CHOSEN: dict[int, tuple[Recipe, Recipe]] = {}
_CHOSEN_MAX = 4096


def _precision_chosen(recipe: Recipe) -> Recipe:
    hit = _CHOSEN.get(id(recipe))
    if hit is not None and hit[0] is recipe:
        return hit[1]
    if len(_CHOSEN) >= _CHOSEN_MAX:
        _CHOSEN.clear()
    copy = replaced(recipe, chosen=(*recipe.chosen, "precision"))
    _CHOSEN[id(recipe)] = (recipe, copy)
    return copy


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class MemoryFigures:
    """What ``estimate`` would say of a concrete recipe's memory, without making the estimate: its
    point (``memory_gb.total_per_gpu``), the upper end of its range, the card's usable memory and
    whether it fits; ``tokens_per_second()`` its speed, as the estimate rounds it."""

    point_gb: float
    upper_gb: float
    usable_gb: float
    fits: bool
    _shape: ModelShape
    _workload: Workload
    _gpu: GpuSpec
    _gpu_count: int
    _sharding: str
    _mem: MemoryParts

    def __init__(
        self, point_gb: float, upper_gb: float, usable_gb: float, fits: bool, _shape: ModelShape, _workload: Workload,
        _gpu: GpuSpec, _gpu_count: int, _sharding: str, _mem: MemoryParts,
    ) -> None:
        self.point_gb = point_gb
        self.upper_gb = upper_gb
        self.usable_gb = usable_gb
        self.fits = fits
        self._shape = _shape
        self._workload = _workload
        self._gpu = _gpu
        self._gpu_count = _gpu_count
        self._sharding = _sharding
        self._mem = _mem

    def tokens_per_second(self) -> float:
        tp = throughput(self._shape, self._workload, self._gpu, self._gpu_count, self._sharding, self._mem)
        return _round(tp.tokens_per_second, 1)


def memory_figures(workload: Workload, gpu: str, gpu_count: int, sharding: str | None) -> MemoryFigures | None:
    """``estimate(workload, gpu, gpu_count, sharding)``'s memory figures, from the memory model
    cards share, for a recipe given in full (micro-batch, checkpointing and accumulation fixed)
    under one scheme; None where the estimate would choose (a recipe or scheme left to ``auto``)
    or refuse the request: ask ``estimate`` then, which says why.

    The headroom search (``candidates.headroom.safer``) finds most of the smaller recipes it tries
    tight too; this tells it so without making their estimates."""
    if gpu_count < 1:
        return None
    try:
        schemes = resolve_sharding(_scheme(workload, sharding), gpu_count)
        if len(schemes) != 1:
            return None
        shape = resolve_model(workload.model)
        spec = gpu_spec(canonical_gpu(gpu))
        check_supported(workload, spec)
        cw = with_precision(workload, spec)
        given = rcp.given_recipe(cw, gpu_count)
        if given is None:
            return None
        # The one trial ``_fit_scheme`` estimates for a recipe given in full (``recipe.fitting_trials``).
        tw = rcp.concrete_workload(cw, gpu_count, *given)
        _check_vision(shape, tw)
    except GpucostError:
        return None
    mem = _memory(shape, tw, spec, gpu_count, schemes[0])
    view = _memory_view(shape, tw, mem)
    usable = usable_vram_gb(spec)
    return MemoryFigures(view.breakdown.total_per_gpu, float(view.range[1]), usable, view.total_gb <= usable,
                         shape, tw, spec, gpu_count, schemes[0], mem)


def moved_to_amount(est: Estimate, w: Workload) -> Estimate:
    """``est`` (an estimate of a workload that differs from ``w`` at most in its amount of
    training) with ``w``'s amount: its hours, FLOPs and dataset needs, checked as ``estimate``
    checks them (``optimizer.estimator.amounts``)."""
    return at_amount(est, w, _check_vision)


_ON_CLEAR: list[Callable[[], None]] = []


def on_clear(forget: Callable[[], None]) -> None:
    """Have ``clear_cache`` also call ``forget``: for memos of figures derived from estimates."""
    _ON_CLEAR.append(forget)


def clear_cache() -> None:
    """Forget memoized estimates, and what was derived from them (after calibration constants change)."""
    _FITTED.clear()
    _PARTS.clear()
    _VIEWS.clear()
    _TRIALS.clear()
    _CHOSEN.clear()
    forget_step_terms()
    forget_host_parts()
    for forget in _ON_CLEAR:
        forget()


def choose_sharding(workload: Workload, gpu: str, gpu_count: int) -> str:
    """The sharding ``estimate`` picks under ``auto``."""
    return estimate(workload, gpu, gpu_count, "auto").sharding
