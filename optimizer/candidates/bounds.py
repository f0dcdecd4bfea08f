"""Floors on what a rental can cost a job per run, without running the estimator.

Why ``single_gpu_hours_floor`` is a floor on the estimator's GPU-hours (``estimator.throughput``):
a run on ``n`` GPUs takes ``n`` times its training hours, ``run_tokens`` times the GPU-seconds per
token of its micro-step, and ``candidates.step_floor`` bounds those from below for every recipe
option generation may price on the GPU type (micro-batch, accumulation, checkpointing and
sharding as the workload allows, the global batch kept exactly, the card's precision): compute at
the fitted matmul efficiency, the memory traffic of activations, logits, weights and the
optimizer's update, launch time, per-step overhead and offload, each as the estimator computes
it, at the least the choices allow. Communication, data-parallel step costs and the estimate's
other hours (setup, download, checkpoints) only add, and no estimate is scaled by measured rows
afterwards. The floor reads the estimator's constants as they are when it is computed.

Why ``rental_floor_usd`` is a floor on an offer's cost per run (``candidates.cloud``): a
configuration on ``nodes`` x ``gpus_per_node`` GPUs costs ``price * nodes * billed(setup +
train)``, plus block storage; billing rounds up, setup and storage are non-negative, spot adds
the expected reclaim losses (``spot_risk``, never negative). ``price * nodes *
train`` is the per-GPU price times the GPU-hours, whatever the count, and a GPU partition (a
quarter card sold for a quarter price) runs at its share of the card's speed, so its per-card
price times the card-hours is the same product. Estimates carry hours rounded to 4 decimals, so
the floor gives back half a unit of that per GPU of the largest configuration.

Only the product's own estimator obeys these formulas; callers passing another estimator must not
use the floors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from optimizer.candidates.cloud import _filter_offers
from optimizer.candidates.rejections import RejectionTally
from optimizer.candidates.step_floor import gpu_seconds_per_token_floor
from optimizer.candidates.types import CostAssumptions
from optimizer.errors import GpucostError
from optimizer.estimator import calibration as cal
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.throughput import run_tokens
from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import Offer

# Estimate hours are rounded to 4 decimals (``estimate._round(hours, 4)``): at most half a unit low.
ROUNDING_SLACK_HOURS = 5e-5


def single_gpu_hours_floor(workload: Workload, gpu: str) -> float:
    """Fewest GPU-hours of training ``workload`` can take on any count of ``gpu`` (see module doc).

    Raises what the estimator would raise for an unknown model or GPU.
    """
    shape = resolve_model(workload.model)
    spec = gpu_spec(gpu)
    return run_tokens(shape, workload) * gpu_seconds_per_token_floor(shape, workload, spec) / 3600.0


def rental_floor_usd(
    offer: Offer, gpu_hours: float, *, allow_spot: bool, assumptions: CostAssumptions
) -> float:
    """Least ``offer`` can cost per run for a job of at least ``gpu_hours`` GPU-hours (see module doc).

    Offers hold positive prices and GPU counts and non-negative storage rates (``optimizer.offer``).
    """
    gpn = float(offer.gpu_count)
    # The largest configuration an offer can run: its nodes, or the one partition.
    largest = max(1.0, gpn * max(1, assumptions.max_nodes))
    hours = max(0.0, gpu_hours - ROUNDING_SLACK_HOURS * largest)
    out = float("inf")
    if offer.price_hour is not None:
        out = offer.price_hour / gpn * hours
    if allow_spot and offer.spot_price_hour is not None:
        # Reclaims only add hours (each offer's own rate, optimizer.spot_risk): the bare hours bound them.
        out = min(out, offer.spot_price_hour / gpn * hours)
    return out


def committed_floor_usd(offer: Offer, gpu_hours: float, hourly_usd: float, *, assumptions: CostAssumptions) -> float:
    """Least a run on ``offer``'s instances committed at ``hourly_usd`` per instance-hour can cost
    (``plan_commitments``: the rate times nodes times the run's hours), for a job of at least
    ``gpu_hours`` GPU-hours: the same product as ``rental_floor_usd`` at another price."""
    gpn = float(offer.gpu_count)
    largest = max(1.0, gpn * max(1, assumptions.max_nodes))
    return hourly_usd / gpn * max(0.0, gpu_hours - ROUNDING_SLACK_HOURS * largest)


@dataclass(frozen=True, slots=True)
class OfferFloors:
    """The offers option generation would price for one job, each with its cost floor.

    ``position[i]`` is ``offers[i]``'s place in the catalog and ``leader[i]`` the place of the first
    offer of its group. Passing a group's first offer along with any of its members keeps the
    groups in catalog order, so a subset of offers is priced in the order the whole catalog is
    (ties between equal costs fall the same way).
    """

    offers: list[Offer]
    floors: list[float]
    position: list[int]
    leader: list[int]
    gpu_hours: list[float] = field(default_factory=list)  # each offer's GPU-hours floor

    def subset(self, threshold_usd: float) -> list[Offer]:
        """The offers whose floor is at most ``threshold_usd``, with their groups' first offers, in
        catalog order."""
        keep = {self.position[i] for i, f in enumerate(self.floors) if f <= threshold_usd}
        keep |= {self.leader[i] for i, f in enumerate(self.floors) if f <= threshold_usd}
        by_place = dict(zip(self.position, self.offers, strict=True))
        return [by_place[k] for k in sorted(keep)]


@dataclass(frozen=True, slots=True)
class OfferGroups:
    """The priceable offers of a catalog under some constraints, grouped as option generation
    groups them (GPU, GPUs per node, memory, fabric); the same for every job of a plan, since
    the grouping reads only providers, regions, GPUs and spot from the constraints."""

    groups: list[tuple[str, list[tuple[int, Offer]]]]  # (canonical GPU, [(catalog place, offer)])

    @classmethod
    def of(cls, offers: Sequence[Offer], constraints: Constraints) -> OfferGroups:
        # Members come in catalog order, so each occurrence of an offer (a catalog may list one
        # twice) takes its own place.
        places: dict[int, deque[int]] = {}
        for i, o in enumerate(offers):
            places.setdefault(id(o), deque()).append(i)
        grouped = _filter_offers(offers, constraints, RejectionTally())
        return cls([(g.gpu, [(places[id(o)].popleft(), o) for o in g.offers]) for g in grouped.values()])

    def floors(
        self, workload: Workload, *, allow_spot: bool, assumptions: CostAssumptions
    ) -> OfferFloors | None:
        """Every priceable offer with its floor for ``workload``; None where the floors need not
        hold (an overlap constant above 1, a negative launch share or setup assumption) or the estimator rejects
        the model or a GPU (option generation then reports it as it does today)."""
        setup = cal.SETUP_HOURS.value if assumptions.setup_hours is None else assumptions.setup_hours
        if cal.OVERLAP_COMM.value > 1.0 or cal.DISPATCH_ADDITIVE_SHARE.value < 0 or setup < 0:
            return None
        hours: dict[str, float] = {}
        out = OfferFloors([], [], [], [])
        for gpu, members in self.groups:
            if gpu not in hours:
                try:
                    hours[gpu] = single_gpu_hours_floor(workload, gpu)
                except GpucostError:
                    return None
            leader = members[0][0]
            for place, o in members:
                out.offers.append(o)
                out.floors.append(rental_floor_usd(o, hours[gpu], allow_spot=allow_spot, assumptions=assumptions))
                out.position.append(place)
                out.leader.append(leader)
                out.gpu_hours.append(hours[gpu])
        return out
