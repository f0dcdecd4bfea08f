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

# How far an offer got before failing; the deepest failure is the one reported.
_DEPTH = {
    EXCLUDED: 0, UNKNOWN_GPU: 0, NO_PRICE: 0, UNSUPPORTED: 1, TOO_MANY_GPUS: 1, OVER_QUOTA: 1,
    NO_VRAM: 2, NO_HOST_RAM: 3, NO_HOST_CPU: 3, LATE: 4, NO_MACHINE_HOURS: 4, OVER_BUDGET: 5,
}


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
    return b if a is None or _DEPTH[b] > _DEPTH[a] else a
