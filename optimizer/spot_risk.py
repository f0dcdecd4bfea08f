"""Spot risk per offer: how often an instance is taken away, what each reclaim costs the job, and
what that does to its hours, its cost and its chance of meeting a deadline.

Inputs, each with where it comes from:

* ``interruptions_per_hour`` (lambda, per instance): AWS from the Spot Instance Advisor bucket of the
  instance type in its region (bundled ``optimizer/data/aws_spot_advisor.csv``, dated 2025-11-30);
  every other provider from a stated prior (no per-type rate is published), marked ``prior:`` in
  ``source``. A job on ``n`` nodes stops when any of them is reclaimed: its rate is ``n * lambda``.
* warning time before the reclaim: AWS two minutes, GCP and Azure 30 seconds (their docs, below).
* checkpoint cost ``c``: checkpoint size (trainable parameters x bytes a parameter's state takes)
  divided by the disk's write rate. When ``c`` fits in the warning, the job saves on notice and
  loses no work; otherwise it loses the work since its last periodic checkpoint.
* restart time ``R``: relaunch, the job's own setup, and reading the checkpoint back.
* checkpoint interval ``tau``: Young's formula ``sqrt(2 c / rate)`` (J. W. Young, "A first order
  approximation to the optimum checkpoint interval", CACM 17(9), 1974) unless the request fixes it.

Expected wall hours come in closed form (what ranking uses); p50/p90 of hours and cost and the
probability of meeting ``deadline_hours`` come from a seeded simulation of the same model, which
also plays the "can't be late" policy: keep running on spot while the slack left can absorb one
more reclaim and still finish on demand; once it cannot, move to on demand (Wu et al., "Can't Be
Late: Optimizing Spot Instance Savings under Deadlines", NSDI 2024, the greedy policy).

Pure functions; the bucket table is package data read once.
"""

from __future__ import annotations

import csv
import io
import math
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from optimizer import spot_walls

# Spot Advisor's "frequency of interruption" buckets, read as the share of instances reclaimed
# within BUCKET_HORIZON_HOURS of running. AWS defines the figure only as "the rate at which Spot
# has reclaimed capacity during the trailing month"; reading it over a whole month of running
# would give rates 30 times lower than here. A day is our stated reading (a training instance's
# typical life), not an AWS figure. ">20%" has no upper end: 30 % is our stated figure.
BUCKET_SHARE: dict[str, float] = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.30}
BUCKET_HORIZON_HOURS = 24.0
AWS_BUCKET_SOURCE = "aws-spot-advisor:2025-11-30 (instances.vantage.sh export)"


def bucket_rate_per_hour(bucket: str) -> float:
    """Reclaims per instance-hour of a Spot Advisor bucket (constant hazard over the horizon)."""
    return -math.log(1.0 - BUCKET_SHARE[bucket]) / BUCKET_HORIZON_HOURS


# Where a provider publishes no per-type rate (GCP, Azure, marketplaces): the worst AWS bucket, so
# an unmeasured offer never looks safer than the riskiest measured one. A prior, marked as such.
PRIOR_RATE_PER_HOUR = bucket_rate_per_hour(">20%")
PRIOR_SOURCE = "prior: no published interruption rate for {provider}; taken as AWS's '>20%' bucket"

# Notice before a reclaim. AWS: "two minutes before" (EC2 User Guide, Spot Instance interruption
# notices); GCP: "30 seconds" for Spot VMs (Compute Engine docs, Spot VMs, preemption process);
# Azure: at least 30 seconds (Scheduled Events, Preempt event). Others: none assumed.
WARNING_HOURS: dict[str, float] = {"aws": 120 / 3600, "gcp": 30 / 3600, "azure": 30 / 3600}

# Bytes of checkpointed state per trainable parameter: bf16 weights (2) + fp32 master copy (4) +
# Adam's two fp32 moments (8) = 14 (ZeRO, Rajbhandari et al. 2020, section 3: 2 + 12 bytes of
# weights and optimizer states per parameter, gradients not saved). 8-bit Adam keeps its moments
# in 1 byte each; Adafactor factored second moments (about none); SGD one fp32 momentum.
CHECKPOINT_BYTES_PER_PARAM: dict[str, float] = {"adamw": 14.0, "adamw_8bit": 8.0, "adafactor": 6.0, "sgd": 10.0}

SIMULATION_TRIALS = 2000
# Reclaims each simulated run is followed through one by one. The lockstep simulation turns once
# per reclaim of its most reclaimed run, so a run of millions of hours (a request may ask for 1e14
# tokens) would turn millions of times: 10.8 s for one 1xT4 spot quote, measured. A run still on
# spot after this many reclaims finishes at the expected rate (``_finish_expected``); a real job
# sees far fewer (an hour-long reclaim interval and 500 of them is three weeks of reclaims alone).
MAX_SIMULATED_RECLAIMS = 500


def checkpoint_gb(trainable_params: float, optimizer: str) -> float:
    return trainable_params * CHECKPOINT_BYTES_PER_PARAM.get(optimizer, 14.0) / 1e9


@dataclass(frozen=True, slots=True)
class SpotRate:
    """An offer's reclaim rate per instance-hour, the notice before one, and where both came from."""

    interruptions_per_hour: float
    warning_hours: float
    source: str
    bucket: str | None = None

    @property
    def key(self) -> tuple[float, float]:
        """What the cost of a configuration reads from the offer (offers sharing it cost alike)."""
        return (self.interruptions_per_hour, self.warning_hours)


@lru_cache(maxsize=1)
def _aws_buckets() -> dict[tuple[str, str], str]:
    text = resources.files("optimizer").joinpath("data/aws_spot_advisor.csv").read_text(encoding="utf-8")
    rows = csv.DictReader(io.StringIO("".join(ln for ln in text.splitlines(True) if not ln.startswith("#"))))
    return {(r["instance_type"], r["region"]): r["bucket"] for r in rows if r["bucket"] in BUCKET_SHARE}


@lru_cache(maxsize=8192)
def spot_rate(provider: str, region: str | None, instance_type: str) -> SpotRate:
    """The reclaim rate of one offer: its Spot Advisor bucket on AWS, else the stated prior."""
    p = provider.lower()
    warning = WARNING_HOURS.get(p, 0.0)
    if p == "aws":
        bucket = _aws_buckets().get((instance_type, region or ""))
        if bucket is not None:
            return SpotRate(bucket_rate_per_hour(bucket), warning, f"{AWS_BUCKET_SOURCE}: {bucket}", bucket)
    return SpotRate(PRIOR_RATE_PER_HOUR, warning, PRIOR_SOURCE.format(provider=p))


@dataclass(frozen=True, slots=True)
class SpotJob:
    """One spot run of a job on one offer: everything the closed form and the simulation read."""

    train_hours: float  # training on the option, no setup, no reclaims
    setup_hours: float  # per node, once at the start
    nodes: int
    rate: SpotRate
    checkpoint_gb: float
    interval_hours: float | None = None  # None: Young's formula

    @property
    def job_rate(self) -> float:
        return self.rate.interruptions_per_hour * self.nodes

    @property
    def checkpoint_hours(self) -> float:
        return spot_walls.checkpoint_hours(self.checkpoint_gb)

    @property
    def restart_hours(self) -> float:
        return spot_walls.restart_hours(self.setup_hours, self.checkpoint_hours)

    @property
    def tau(self) -> float:
        """Hours of training between periodic checkpoints (``spot_walls.tau_hours``)."""
        return spot_walls.tau_hours(self.train_hours, self.checkpoint_hours, self.job_rate, self.interval_hours)

    @property
    def saves_on_notice(self) -> bool:
        """The checkpoint is written within the warning, so a reclaim loses no training."""
        return spot_walls.saves_on_notice(self.checkpoint_hours, self.rate.warning_hours)

    @property
    def overhead(self) -> float:
        """Share of time spent writing periodic checkpoints: c / tau."""
        return self.checkpoint_hours / self.tau

    @property
    def loss_hours(self) -> float:
        """Expected hours one reclaim costs: the restart, plus half an interval of lost work unless
        the job saves on notice."""
        return self.restart_hours + spot_walls.lost_hours(self.checkpoint_hours, self.rate.warning_hours, self.tau)


def train_wall_hours(
    train_hours: float, setup_hours: float, nodes: int, rate: SpotRate, checkpoint_gb: float,
    interval_hours: float | None = None,
) -> float:
    """``expected_train_wall_hours`` of a configuration on an offer with ``rate``."""
    return spot_walls.wall_hours(train_hours, setup_hours, nodes, rate.interruptions_per_hour, rate.warning_hours,
                                 checkpoint_gb, interval_hours)


def expected_train_wall_hours(job: SpotJob) -> float:
    """Expected wall hours of the training part (setup excluded): ``spot_walls.wall_hours``, the
    closed form of the job's properties."""
    return spot_walls.wall_hours(job.train_hours, job.setup_hours, job.nodes, job.rate.interruptions_per_hour,
                                 job.rate.warning_hours, job.checkpoint_gb, job.interval_hours)


@dataclass(frozen=True, slots=True)
class _Trial:
    spot_hours: float  # wall hours on spot (setup included), each node
    on_demand_hours: float  # wall hours after falling back, each node
    fell_back: bool
    reclaims: int

    @property
    def hours(self) -> float:
        return self.spot_hours + self.on_demand_hours


def _trial(job: SpotJob, deadline: float | None, fallback: bool, rng: random.Random) -> _Trial:
    """One run under the can't-be-late policy (``fallback``) or spot to the end: the policy written
    out one reclaim at a time, which the lockstep ``_trials`` that answers requests is held to."""
    W, k, R, tau = job.train_hours, job.overhead, job.restart_hours, job.tau
    lam = job.job_rate
    # Worst training lost at one reclaim: a whole interval, unless saved on notice.
    worst_lost = 0.0 if job.saves_on_notice else tau
    guard = fallback and deadline is not None

    def slack(t: float, p: float) -> float:
        # Hours to spare if a reclaim came now, lost the most, and the rest ran on demand.
        return deadline - (t + worst_lost + R + (W - p))  # type: ignore[operator]

    t, p, spot, reclaims = 0.0, 0.0, 0.0, 0
    if guard and slack(job.setup_hours, 0.0) < 0:
        # Not even one reclaim fits in the deadline: start on demand.
        return _Trial(0.0, job.setup_hours + W, True, 0)
    t = spot = job.setup_hours
    while True:
        seg = (W - p) * (1.0 + k)
        x = rng.expovariate(lam) if lam > 0 else math.inf
        # With the guard, when slack is used up by checkpoint overhead (it shrinks at k/(1+k) of each hour).
        y = math.inf
        if guard:
            s = slack(t, p)
            y = s * (1.0 + k) / k if k > 0 else math.inf
        end = min(seg, x, y)
        if end == seg:
            return _Trial(spot + seg, 0.0, False, reclaims)
        if end == y:
            # Checkpoint now and move on demand.
            p += y / (1.0 + k)
            spot += y + job.checkpoint_hours
            t += y + job.checkpoint_hours
            return _Trial(spot, R + (W - p), True, reclaims)
        reclaims += 1
        done = x / (1.0 + k)
        p = min(W, p + (done if job.saves_on_notice else tau * math.floor(done / tau + 1e-12)))
        t += x
        spot += x
        if guard and slack(t + R, p) < 0:
            # Relaunching on spot would leave too little slack for another reclaim.
            return _Trial(spot, R + (W - p), True, reclaims)
        t += R
        spot += R


@dataclass(frozen=True, slots=True)
class _Trials:
    """``_trial``'s outcome for many runs at once, as arrays (one entry per run)."""

    spot_hours: np.ndarray
    on_demand_hours: np.ndarray
    fell_back: np.ndarray
    reclaims: np.ndarray
    finished_expected: int = 0  # runs still on spot after MAX_SIMULATED_RECLAIMS (``_finish_expected``)

    @property
    def hours(self) -> np.ndarray:
        return self.spot_hours + self.on_demand_hours


def _trials(job: SpotJob, deadline: float | None, fallback: bool, n: int,
            draw: Callable[[np.ndarray, int], np.ndarray]) -> _Trials:
    """``n`` runs of ``_trial`` in lockstep: step i draws the next reclaim of every run still going
    (``draw(runs, i)``: one Exp(1) value per run in ``runs``, scaled by the job's rate here), so the
    loop turns as many times as the most reclaimed run was reclaimed (a handful), not once per run.
    Given the same draws, each run ends exactly as ``_trial`` ends it (``tests/unit/test_spot_risk.py``)."""
    W, k, R, tau, c = job.train_hours, job.overhead, job.restart_hours, job.tau, job.checkpoint_hours
    lam = job.job_rate
    worst_lost = 0.0 if job.saves_on_notice else tau
    guard = fallback and deadline is not None
    spot_out = np.zeros(n)
    od_out = np.zeros(n)
    fell = np.zeros(n, dtype=bool)
    reclaims = np.zeros(n, dtype=np.int64)
    if guard and deadline - (job.setup_hours + worst_lost + R + W) < 0:  # type: ignore[operator]
        # Not even one reclaim fits in the deadline: start on demand.
        return _Trials(spot_out, np.full(n, job.setup_hours + W), np.ones(n, dtype=bool), reclaims)
    live = np.arange(n)
    t = np.full(n, job.setup_hours)
    spot = np.full(n, job.setup_hours)
    p = np.zeros(n)
    step = 0
    while live.size:
        if step == MAX_SIMULATED_RECLAIMS:
            _finish_expected(job, guard, live, p, spot, spot_out, od_out, fell, reclaims)
            return _Trials(spot_out, od_out, fell, reclaims, int(live.size))
        seg = (W - p) * (1.0 + k)
        x = draw(live, step) / lam if lam > 0 else np.full(live.size, math.inf)
        step += 1
        if guard and k > 0:
            y = (deadline - (t + worst_lost + R + (W - p))) * (1.0 + k) / k  # type: ignore[operator]
        else:
            y = np.full(live.size, math.inf)
        end = np.minimum(np.minimum(seg, x), y)
        done_spot = end == seg
        to_demand = ~done_spot & (end == y)
        reclaimed = ~done_spot & ~to_demand
        # Finished on spot.
        spot_out[live[done_spot]] = spot[done_spot] + seg[done_spot]
        # Checkpoint now and move on demand.
        pm = p[to_demand] + y[to_demand] / (1.0 + k)
        spot_out[live[to_demand]] = spot[to_demand] + y[to_demand] + c
        od_out[live[to_demand]] = R + (W - pm)
        fell[live[to_demand]] = True
        # Reclaimed: keep what was saved, then relaunch unless the slack is gone.
        xr = x[reclaimed]
        ids = live[reclaimed]
        reclaims[ids] += 1
        done = xr / (1.0 + k)
        kept = done if job.saves_on_notice else tau * np.floor(done / tau + 1e-12)
        pr = np.minimum(W, p[reclaimed] + kept)
        tr = t[reclaimed] + xr
        sr_ = spot[reclaimed] + xr
        if guard:
            stop = deadline - (tr + R + worst_lost + R + (W - pr)) < 0  # type: ignore[operator]
        else:
            stop = np.zeros(ids.size, dtype=bool)
        spot_out[ids[stop]] = sr_[stop]
        od_out[ids[stop]] = R + (W - pr[stop])
        fell[ids[stop]] = True
        go = ~stop
        live, p, t, spot = ids[go], pr[go], tr[go] + R, sr_[go] + R
    return _Trials(spot_out, od_out, fell, reclaims)


def _finish_expected(job: SpotJob, guard: bool, live: np.ndarray, p: np.ndarray, spot: np.ndarray,
                     spot_out: np.ndarray, od_out: np.ndarray, fell: np.ndarray, reclaims: np.ndarray) -> None:
    """Runs still on spot after ``MAX_SIMULATED_RECLAIMS`` reclaims (each just relaunched: progress
    ``p``, ``spot`` hours on spot), ended without drawing each further reclaim. Under the can't-be-late
    policy they go on demand from their last reclaim, as the policy does once its slack is spent
    (a run reclaimed that often has spent it); otherwise the rest of their training takes its
    expected wall time (``expected_train_wall_hours``), with the reclaims expected in it."""
    left = job.train_hours - p
    if guard:
        spot_out[live] = spot - job.restart_hours
        od_out[live] = job.restart_hours + left
        fell[live] = True
        return
    per_hour = expected_train_wall_hours(job) / job.train_hours if job.train_hours > 0 else 0.0
    wall = left * per_hour
    spot_out[live] = spot + wall
    if math.isfinite(per_hour):
        reclaims[live] += np.rint(wall * job.job_rate).astype(np.int64)


def _quantile(sorted_values: list[float], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


def seed_for(*parts: object) -> int:
    """A stable seed per option, so the same question gets the same figures."""
    return zlib.crc32("|".join(str(p) for p in parts).encode("utf-8"))


def spot_risk_summary(
    job: SpotJob,
    *,
    spot_hourly_usd: float,
    on_demand_hourly_usd: float | None,
    deadline_hours: float | None,
    seed: int,
    trials: int = SIMULATION_TRIALS,
) -> dict[str, Any]:
    """What an option shows of its spot risk (prices per node-hour; hours and cost per run).

    With a deadline and an on-demand price, the run follows the can't-be-late policy and the cost
    distribution counts the on-demand hours it falls back to."""
    fallback = deadline_hours is not None and on_demand_hourly_usd is not None
    n = max(1, trials)
    rng = np.random.default_rng(seed)
    runs = _trials(job, deadline_hours, fallback, n, lambda live, _step: rng.standard_exponential(live.size))
    od = on_demand_hourly_usd or 0.0
    cost_array = (runs.spot_hours * spot_hourly_usd + runs.on_demand_hours * od) * job.nodes
    # Sorted as arrays (the same values in the same order as ``sorted`` gives, a third of the
    # time), then summed and indexed as Python floats, as before.
    costs = np.sort(cost_array).tolist()
    hours = np.sort(runs.hours).tolist()
    # The same run on demand from the start: what the price ratio alone would promise.
    od_cost = (job.setup_hours + job.train_hours) * od * job.nodes if on_demand_hourly_usd is not None else None
    expected_cost = sum(costs) / n
    met = int(np.count_nonzero(runs.hours <= deadline_hours + 1e-9)) if deadline_hours is not None else 0
    return {
        "interruptions_per_hour": round(job.rate.interruptions_per_hour, 6),
        "source": job.rate.source,
        "bucket": job.rate.bucket,
        "warning_seconds": round(job.rate.warning_hours * 3600.0, 1),
        "checkpoint_gb": round(job.checkpoint_gb, 3),
        "checkpoint_seconds": round(job.checkpoint_hours * 3600.0, 1),
        "checkpoint_interval_hours": round(job.tau, 4),
        "interval_rule": "request" if job.interval_hours is not None else "young",
        "saves_on_notice": job.saves_on_notice,
        "restart_hours": round(job.restart_hours, 4),
        "expected_hours": round(sum(hours) / n, 4),
        "p50_hours": round(_quantile(hours, 0.5), 4),
        "p90_hours": round(_quantile(hours, 0.9), 4),
        "expected_cost_usd": round(expected_cost, 4),
        "p50_cost_usd": round(_quantile(costs, 0.5), 4),
        "p90_cost_usd": round(_quantile(costs, 0.9), 4),
        "p_meets_deadline": round(met / n, 4) if deadline_hours is not None else None,
        "on_demand_cost_usd": round(od_cost, 4) if od_cost is not None else None,
        "price_ratio": round(spot_hourly_usd / od, 4) if od else None,
        "expected_cost_ratio": round(expected_cost / od_cost, 4) if od_cost else None,
        "fallback": "on_demand" if fallback else None,
        "p_fallback": round(int(np.count_nonzero(runs.fell_back)) / n, 4),
        "expected_reclaims": round(int(runs.reclaims.sum()) / n, 4),
        "cost_per": "run",
        "method": f"seeded simulation, {n} runs" + (
            f"; {runs.finished_expected} still on spot after {MAX_SIMULATED_RECLAIMS} reclaims "
            "finished at the expected rate" if runs.finished_expected else ""),
    }


@dataclass(frozen=True, slots=True)
class SpotOptions:
    """What a request says that spot risk reads: the deadline (for the fallback and the chance of
    meeting it) and a fixed checkpoint interval, if any."""

    deadline_hours: float | None = None
    interval_hours: float | None = None

    @classmethod
    def of(cls, constraints: Any) -> SpotOptions:
        return cls(getattr(constraints, "deadline_hours", None), getattr(constraints, "checkpoint_interval_hours", None))


@dataclass(frozen=True, slots=True)
class SpotPricing:
    """A spot candidate's risk inputs, summarised (simulated) only for the options shown."""

    job: SpotJob
    spot_hourly_usd: float  # per node
    on_demand_hourly_usd: float | None  # per node: the fallback's price, None: no fallback
    deadline_hours: float | None
    seed: int

    def summary(self) -> dict[str, Any]:
        return dict(_summary(self))


# The same option asked about again (a repeated quote, a frontier after a quote) is not simulated
# again: the inputs are frozen values, the answer a function of them.
@lru_cache(maxsize=4096)
def _summary(sp: SpotPricing) -> dict[str, Any]:
    return spot_risk_summary(
        sp.job, spot_hourly_usd=sp.spot_hourly_usd, on_demand_hourly_usd=sp.on_demand_hourly_usd,
        deadline_hours=sp.deadline_hours, seed=sp.seed,
    )
