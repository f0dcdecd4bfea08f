"""A spot run's expected training wall hours in closed form, and the two assumptions it reads.

Reclaims arrive as a Poisson process over the wall time itself, each costing a relaunch, the job's
setup and the checkpoint's read, plus half an interval of lost work unless the checkpoint is
written within the notice; so ``T = W' / (1 - rate * loss)`` with ``W'`` the training plus its
periodic checkpoints (``optimizer.spot_risk`` holds the rates, the simulation that checks this form
and the summary an option shows).

Apart from ``spot_risk`` so that it runs compiled (``optimizer.native``): a spot quote prices every
configuration of every (GPU, GPUs per node) group once per reclaim rate its offers have, about 300
times a quote.
"""

from __future__ import annotations

import math

# The disk the checkpoint goes to: EBS gp3 baseline throughput, 125 MiB/s (AWS EBS User Guide,
# "General Purpose SSD volumes"), the block storage this tool prices for the job's disk.
DISK_GB_PER_S = 125 * 2**20 / 1e9
# Getting a replacement instance and back to the job's start: an assumption (the product's
# previous fixed restart time), added to the job's own setup and the checkpoint read.
RELAUNCH_HOURS = 0.1


def young_interval_hours(checkpoint_hours: float, rate_per_hour: float) -> float:
    """Young's optimum interval between checkpoints: sqrt(2 x checkpoint cost x mean time between failures)."""
    if rate_per_hour <= 0:
        return math.inf
    return math.sqrt(2.0 * max(checkpoint_hours, 1e-9) / rate_per_hour)


def checkpoint_hours(checkpoint_gb: float) -> float:
    """Hours to write (or read) a checkpoint of ``checkpoint_gb``."""
    return checkpoint_gb / DISK_GB_PER_S / 3600.0


def restart_hours(setup_hours: float, ckpt_hours: float) -> float:
    """What a reclaim costs before any lost work: a new instance, the job's setup, the checkpoint read."""
    return RELAUNCH_HOURS + setup_hours + ckpt_hours


def tau_hours(train_hours: float, ckpt_hours: float, job_rate: float, interval_hours: float | None) -> float:
    """Hours of training between periodic checkpoints (``interval_hours``, None: Young's), at least
    one checkpoint's writing time and at most the whole run (then only the notice saves work)."""
    t = interval_hours if interval_hours is not None else young_interval_hours(ckpt_hours, job_rate)
    return min(max(t, ckpt_hours, 1e-6), max(train_hours, 1e-6))


def saves_on_notice(ckpt_hours: float, warning_hours: float) -> bool:
    """The checkpoint is written within the reclaim's notice, so a reclaim loses no training."""
    return ckpt_hours <= warning_hours


def lost_hours(ckpt_hours: float, warning_hours: float, tau: float) -> float:
    """Training one reclaim loses: none when it saves on notice, else half an interval and its
    checkpoints' share."""
    return 0.0 if saves_on_notice(ckpt_hours, warning_hours) else tau * (1.0 + ckpt_hours / tau) / 2.0


def wall_hours(train_hours: float, setup_hours: float, nodes: int, per_hour: float, warning_hours: float,
               checkpoint_gb: float, interval_hours: float | None) -> float:
    """Expected wall hours of the training part (setup excluded) of ``nodes`` instances, each
    reclaimed ``per_hour`` times an hour with ``warning_hours`` of notice; ``interval_hours`` between
    checkpoints, None: Young's. ``spot_risk.SpotJob``'s properties read the same pieces, each
    computed here once (``tests/unit/test_spot_risk.py`` holds the two to the same floats)."""
    job_rate = per_hour * nodes  # either node's reclaim stops the job
    ckpt = checkpoint_hours(checkpoint_gb)
    tau = tau_hours(train_hours, ckpt, job_rate, interval_hours)
    loss = restart_hours(setup_hours, ckpt) + lost_hours(ckpt, warning_hours, tau)  # what one reclaim costs
    work = train_hours * (1.0 + ckpt / tau)  # training plus its periodic checkpoints
    slowdown = job_rate * loss
    if slowdown >= 1.0:
        return math.inf
    return work / (1.0 - slowdown)
