"""Rejection reasons of option generation, how far each got, and their tally."""

from __future__ import annotations

from dataclasses import dataclass, field

EXCLUDED = "excluded by constraints"
UNKNOWN_GPU = "unknown GPU"
NO_PRICE = "no price"
UNSUPPORTED = "not supported by the estimator"
TOO_MANY_GPUS = "exceeds max GPUs"
OVER_QUOTA = "exceeds provider GPU quota"
NO_VRAM = "insufficient VRAM"
NO_HOST_RAM = "insufficient host RAM"
NO_HOST_CPU = "insufficient host CPU"
LATE = "misses deadline"
OVER_BUDGET = "over budget"
NO_MACHINE_HOURS = "needs more machines than allowed"
# Dynamic reasons start with these; the rest of the text names the figures.
NO_GLOBAL_BATCH = "cannot keep global batch"  # "cannot keep global batch 16 on 64 GPUs"
NO_VRAM_MARGIN = "insufficient VRAM with the safety margin kept free"
SUSPECT_PRICE = "suspect price"  # "suspect price: far from ..." / "suspect price: older than ..."
NO_HOST_FEED = "host cannot feed the GPUs"  # below the seeds' 70 % busy floor
SUBSCRIPTION_LIMIT = "subscription limits"  # "subscription limits: ..."

# How far an offer got before failing; the deepest failure is the one reported.
_DEPTH = {
    EXCLUDED: 0, UNKNOWN_GPU: 0, NO_PRICE: 0, UNSUPPORTED: 1, TOO_MANY_GPUS: 1, OVER_QUOTA: 1,
    NO_VRAM: 2, NO_HOST_RAM: 3, NO_HOST_CPU: 3, LATE: 4, NO_MACHINE_HOURS: 4, OVER_BUDGET: 5,
    NO_VRAM_MARGIN: 2, NO_HOST_FEED: 3,
}
_PREFIX_DEPTH = {SUSPECT_PRICE: 0, NO_GLOBAL_BATCH: 1, SUBSCRIPTION_LIMIT: 4}


def _depth(reason: str) -> int:
    d = _DEPTH.get(reason)
    if d is not None:
        return d
    for prefix, depth in _PREFIX_DEPTH.items():
        if reason.startswith(prefix):
            return depth
    return 1


@dataclass(slots=True)
class RejectionTally:
    """Rejections: counts per reason with a few examples each."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    max_examples: int = 3

    def add(self, reason: str, example: str, count: int = 1) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + count
        ex = self.examples.setdefault(reason, [])
        if len(ex) < self.max_examples and example not in ex:
            ex.append(example)


def _deeper(a: str | None, b: str) -> str:
    return b if a is None or _depth(b) > _depth(a) else a
