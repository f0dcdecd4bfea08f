"""A group's kept configurations for another amount of training (tokens, samples, epochs).

``candidates.cloud`` keeps each (GPU, GPUs per node) group's configurations across requests. What
a configuration is (nodes, sharding, recipe, memory, whether it fits, why not) does not depend on
how much is trained; its training hours and its dataset's share of host RAM and disk do. So the
configurations are kept per workload without its amount (``Workload.rate_key``) and moved to the
amount a request asks for here: the estimate each one was made from is moved by the estimator
(``estimate.moved_to_amount``) and the configuration's amount figures are taken from it as
``cloud._configs`` takes them (``movable`` checks, once per kept entry, that both give the same
figures). A quote for tokens T is then the same, figure for figure, whether computed cold or right
after one for other tokens (``tests/unit/test_amounts.py``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from optimizer.candidates.estimator import job_host
from optimizer.estimator.amounts import amount_kind, same_amount
from optimizer.estimator.estimate import moved_to_amount
from optimizer.estimator.workload import Workload

if TYPE_CHECKING:
    from optimizer.results import Estimate

C = TypeVar("C")


def amount_key(w: Workload) -> tuple[str, tuple[str, ...]]:
    """What kept configurations are keyed on in place of ``w.cache_key()``: the workload without its
    amount, and which amount fields it gives (an image model's tokens are refused, its samples not)."""
    return w.rate_key(), amount_kind(w)


def amount_figures(est: Estimate, gpus_per_node: float, total_gpus: float,
                   setup_hours: float | None) -> dict[str, Any]:
    """A configuration's figures that follow the amount of training, from its estimate: the
    arithmetic ``cloud._configs`` uses (``movable`` holds the two to the same figures)."""
    whole = gpus_per_node >= 1 and float(gpus_per_node).is_integer()
    host = job_host(est)
    # The estimate's hours include its setup; option generation bills setup once, apart.
    train = max(0.0, est.hours - host.setup_hours)
    # A GPU partition (g6f: a quarter GPU) runs at its share of the card's speed.
    hours = train if whole else train / gpus_per_node
    # The estimator sizes the host for one node of up to 8 GPUs.
    share = (gpus_per_node / min(total_gpus, 8)) if whole else 1.0
    return {
        "train_hours": hours,
        "ram_gb_per_node": host.ram_gb * share,
        "cores_per_node": host.cpu_cores * share,
        "setup_hours": host.setup_hours if setup_hours is None else setup_hours,
        "disk_gb_per_node": est.host.disk_gb,
    }


def moved_estimate(est: Estimate | str, w: Workload) -> Estimate | str:
    """A kept estimate (or rejection reason) for ``w``'s amount."""
    if isinstance(est, str) or same_amount(est, w):
        return est
    return moved_to_amount(est, w)


def moved_config(c: C, w: Workload, gpus_per_node: float, setup_hours: float | None) -> C:
    """Kept configuration ``c`` (a ``cloud._Config``) for ``w``'s amount of training. A rejected one
    (``reason`` set) is returned as it is: only its reason is read, and that is the same for any amount."""
    source = getattr(c, "source", None)
    if source is None or getattr(c, "reason", None) is not None or same_amount(source, w):
        return c
    est = moved_to_amount(source, w)
    figures = amount_figures(est, gpus_per_node, c.total_gpus, setup_hours)  # type: ignore[attr-defined]
    return dataclasses.replace(c, source=est, **figures)  # type: ignore[type-var]


def movable(cfgs: list[Any], gpus_per_node: float, setup_hours: float | None) -> bool:
    """Whether ``amount_figures`` gives each configuration's figures exactly as ``cloud._configs``
    gave them: kept configurations move to another amount only then (a change to one of the two
    that the other lacks makes them computed anew, never wrong)."""
    for c in cfgs:
        if c.source is None or c.reason is not None:
            continue  # never moved (``moved_config``)
        want = amount_figures(c.source, gpus_per_node, c.total_gpus, setup_hours)
        if any(getattr(c, k) != v for k, v in want.items()):
            return False
    return True


class MovingMemo(dict):  # type: ignore[type-arg]
    """A request's memo of estimates (``(gpu, count, sharding) -> Estimate | reason``) that may hold
    kept estimates of another amount of training: each is moved to ``workload``'s amount when read
    (most are only counted, in ``estimator_calls``), and the moved one replaces it."""

    def __init__(self, workload: Workload) -> None:
        super().__init__()
        self.workload = workload

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)
        moved = moved_estimate(value, self.workload)
        if moved is not value:
            super().__setitem__(key, moved)
        return moved

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def values(self) -> Any:  # every read moves
        return [self[k] for k in self]

    def items(self) -> Any:
        return [(k, self[k]) for k in self]
