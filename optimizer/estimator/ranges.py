"""How sure an estimate is: ranges on peak memory and throughput, and warnings near the card's size.

A range is the point estimate times ``1 -/+ w``, where the relative width ``w`` combines, in
quadrature, a base width (the leave-one-source-out error the bench measures on published rows:
about four rows in five fall inside it) with one term for each thing the published rows cover
thinly: QLoRA, long contexts, big vocabularies, stacks other than eager transformers, offload,
image models, bf16 emulated on pre-Ampere cards, many nodes.
"""

from __future__ import annotations

import math

from optimizer.estimator import calibration as cal
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.stacks import stack_profile
from optimizer.estimator.workload import Workload

NEAR_CAPACITY = 0.95  # a fit above this share of the card is worth a warning by itself


def _combine(*terms: float) -> float:
    return math.sqrt(sum(t * t for t in terms))


def memory_width(shape: ModelShape, w: Workload, logits_share: float) -> float:
    """Relative half-width of the peak-memory range."""
    terms = [cal.VRAM_RANGE_BASE.value, stack_profile(w.stack).uncertainty]
    if w.method == "qlora":
        terms.append(0.10)
    if not shape.is_vision and w.seq_len >= 4096:
        terms.append(0.05 if w.seq_len < 16384 else 0.10)
    if shape.lm_head and shape.vocab >= 100_000:
        terms.append(0.15 * logits_share)  # the loss's buffers differ most between stacks
    if w.offload != "none":
        terms.append(0.15)
    if shape.is_vision:
        terms.append(0.10)
    return _combine(*terms)


def throughput_width(shape: ModelShape, w: Workload, gpu_count: int, emulated_bf16: bool,
                     unknown_arch: bool = False) -> float:
    """Relative half-width of the throughput range."""
    terms = [cal.TPUT_RANGE_BASE.value, 1.5 * stack_profile(w.stack).uncertainty]
    if unknown_arch:
        terms.append(0.40)  # no published sweep for the architecture
    if w.method == "qlora":
        terms.append(0.15)
    if gpu_count > 8:
        terms.append(0.10)
    if w.offload != "none":
        terms.append(0.30)
    if shape.is_vision:
        terms.append(0.20)  # image rows come from two families; family-left-out misses reach ~30%
    if emulated_bf16:
        terms.append(0.30)
    if shape.arch == "cnn" and w.precision in ("fp32", "tf32"):
        terms.append(0.20)  # TF32/fp32 convolutions: one published family (DeepLearningExamples)
    return _combine(*terms)


def span(value: float, width: float, floor: float = 0.0) -> list[float]:
    """``[low, high]`` around ``value``; the low end never under ``floor`` (what surely exists)."""
    low = max(floor, value * (1.0 - width))
    return [rounded(low, 3), rounded(value * (1.0 + width), 3)]


# Below 2**52 in magnitude a double's fraction (``y - floor(y)``) is exact, and so is every half.
EXACT_BELOW = 4503599627370496.0


def rounded(x: float, nd: int) -> float:
    """``float(round(x, nd))``, bit for bit, for ``nd`` 1 to 4 without its decimal conversion.

    ``round`` writes ``x`` out in decimal, rounds the digits and reads them back (0.2 us; an estimate
    rounds a dozen figures). Scaled by ``10**nd``, ``x`` is rounded once to a double; rounding never
    crosses a double, and every half below ``EXACT_BELOW`` is one, so a product below a half is
    the exact product's side of it, and only a product equal to a half leaves the side unknown. The
    nearest whole number over ``10**nd`` (both exact doubles, one correctly rounded division) is
    then the double nearest the rounded decimal, which is what ``round`` returns. On a half, and
    for anything else, ``round`` itself answers. ``tests/unit/test_rounding.py`` holds the two to
    the same bits."""
    if nd == 3:
        p = 1000.0
    elif nd == 1:
        p = 10.0
    elif nd == 2:
        p = 100.0
    elif nd == 4:
        p = 10000.0
    else:
        return float(round(x, nd))
    y = x * p
    if -EXACT_BELOW < y < EXACT_BELOW:
        fl = float(int(y))  # toward zero, then down: the floor
        if fl > y:
            fl -= 1.0
        frac = y - fl
        if frac != 0.5:
            out = (fl + 1.0 if frac > 0.5 else fl) / p
            # ``round`` keeps the sign of what it rounds to zero.
            return out if out != 0.0 else math.copysign(0.0, x)
    return float(round(x, nd))  # a half, too large, or not a number


def capacity_warnings(total_gb: float, high_gb: float, usable_gb: float, gpu_name: str) -> list[str]:
    """Warnings for a fit whose upper end, or the point itself, is close to the card's size."""
    if total_gb > usable_gb:
        return []
    share = total_gb / usable_gb
    if high_gb > usable_gb or share >= NEAR_CAPACITY:
        return [
            f"near capacity: {total_gb:.1f} of {usable_gb:.0f} GB on {gpu_name} ({share:.0%}); the upper end "
            f"of the estimate ({high_gb:.1f} GB) {'exceeds' if high_gb > usable_gb else 'is close to'} the card, "
            "so a real run may run out of memory: a smaller micro-batch or checkpointing leaves headroom"
        ]
    return []
