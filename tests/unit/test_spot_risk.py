"""Spot risk per offer (optimizer.spot_risk): rates from the bundled Spot Advisor buckets or a
marked prior, Young's interval, saving on notice, the closed form against the simulation, and the
can't-be-late fallback."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizer import spot_risk as sr
from optimizer import spot_walls as sw


def test_bucket_rates_rise_with_the_bucket_and_come_from_the_bundled_table() -> None:
    rates = [sr.bucket_rate_per_hour(b) for b in ("<5%", "5-10%", "10-15%", "15-20%", ">20%")]
    assert rates == sorted(rates) and rates[0] > 0
    # A share p reclaimed within the horizon: 1 - exp(-rate * horizon) = p.
    assert 1 - math.exp(-rates[-1] * sr.BUCKET_HORIZON_HOURS) == pytest.approx(sr.BUCKET_SHARE[">20%"])
    # Rows of the Spot Advisor export (2025-11-30): p4d.24xlarge us-east-1 is ">20%", p5.48xlarge "5-10%".
    p4d = sr.spot_rate("aws", "us-east-1", "p4d.24xlarge")
    p5 = sr.spot_rate("aws", "us-east-1", "p5.48xlarge")
    assert (p4d.bucket, p5.bucket) == (">20%", "5-10%")
    assert p4d.interruptions_per_hour > p5.interruptions_per_hour
    assert "aws-spot-advisor:2025-11-30" in p4d.source and p4d.source.endswith(">20%")
    assert p4d.warning_hours == pytest.approx(2 / 60)


def test_providers_without_published_rates_get_a_marked_prior() -> None:
    gcp = sr.spot_rate("gcp", "us-central1", "a2-highgpu-1g")
    assert gcp.source.startswith("prior:") and gcp.bucket is None
    assert gcp.interruptions_per_hour == sr.PRIOR_RATE_PER_HOUR
    assert gcp.warning_hours == pytest.approx(30 / 3600)
    # An AWS type/region the table lacks (p4d.24xlarge eu-north-1 has prices but no bucket) is a prior too.
    missing = sr.spot_rate("aws", "eu-north-1", "p4d.24xlarge")
    assert missing.source.startswith("prior:")
    assert sr.spot_rate("vast", "x", "y").warning_hours == 0.0


def _job(train: float = 10.0, ckpt_gb: float = 0.6, nodes: int = 1, rate: sr.SpotRate | None = None,
         interval: float | None = None) -> sr.SpotJob:
    return sr.SpotJob(train, 0.2, nodes, rate or sr.spot_rate("aws", "us-east-1", "p4d.24xlarge"), ckpt_gb, interval)


def test_young_interval_and_what_a_reclaim_loses() -> None:
    small = _job(ckpt_gb=0.6)  # QLoRA-sized: written in seconds, inside AWS's two-minute notice
    assert small.saves_on_notice
    assert small.tau == pytest.approx(math.sqrt(2 * small.checkpoint_hours / small.job_rate))
    assert small.loss_hours == pytest.approx(small.restart_hours)
    big = _job(ckpt_gb=112.0)  # a full 8B checkpoint (14 bytes/param): minutes, past the notice
    assert not big.saves_on_notice
    assert big.loss_hours > big.restart_hours + big.tau / 2
    fixed = _job(ckpt_gb=112.0, interval=1.0)
    assert fixed.tau == 1.0
    # Two nodes: either one's reclaim stops the job.
    assert _job(nodes=2).job_rate == pytest.approx(2 * small.job_rate)
    assert sr.checkpoint_gb(8.03e9, "adamw") == pytest.approx(112.42, abs=0.01)


def _by_properties(job: sr.SpotJob) -> float:
    """The closed form read off the job's properties, as ``expected_train_wall_hours`` read it
    before it computed each figure once."""
    work = job.train_hours * (1.0 + job.overhead)
    slowdown = job.job_rate * job.loss_hours
    return math.inf if slowdown >= 1.0 else work / (1.0 - slowdown)


def test_the_closed_form_gives_the_floats_the_jobs_properties_give() -> None:
    """Option generation prices every configuration per reclaim rate with ``spot_walls.wall_hours``
    (``cloud._price_group``; ``train_wall_hours`` and ``expected_train_wall_hours`` call it too). It
    must give the job's own figures exactly (not approximately): options are compared by cost."""
    rng = np.random.default_rng(7)
    rates = [sr.spot_rate("aws", "us-east-1", "p4d.24xlarge"), sr.spot_rate("aws", "us-east-1", "p5.48xlarge"),
             sr.spot_rate("gcp", "us-central1", "a2-highgpu-1g"), sr.spot_rate("vast", "x", "y")]
    cases = 0
    kinds = {"saves on notice": 0, "loses work": 0, "never finishes": 0, "interval given": 0}
    for _ in range(3000):
        rate = rates[int(rng.integers(len(rates)))]
        if rng.random() < 0.2:  # rates high enough that the job never finishes
            rate = sr.SpotRate(float(rng.uniform(0.5, 5.0)), rate.warning_hours, "test")
        train = float(10 ** rng.uniform(-4, 3))
        setup = float(rng.uniform(0, 2))
        nodes = int(rng.integers(1, 17))
        ckpt_gb = float(10 ** rng.uniform(-2, 3))
        interval = None if rng.random() < 0.6 else float(10 ** rng.uniform(-3, 1))
        job = sr.SpotJob(train, setup, nodes, rate, ckpt_gb, interval)
        want = _by_properties(job)
        assert sw.wall_hours(train, setup, nodes, rate.interruptions_per_hour, rate.warning_hours, ckpt_gb,
                             interval) == want
        assert sr.train_wall_hours(train, setup, nodes, rate, ckpt_gb, interval) == want
        assert sr.expected_train_wall_hours(job) == want
        cases += 1
        kinds["saves on notice" if job.saves_on_notice else "loses work"] += 1
        kinds["never finishes"] += math.isinf(want)
        kinds["interval given"] += interval is not None
    assert cases == 3000 and all(n > 50 for n in kinds.values()), kinds


def test_closed_form_matches_the_simulated_mean() -> None:
    # A risky case so that reclaims happen in most runs: 20 h on 4 nodes with a big checkpoint.
    job = _job(train=20.0, ckpt_gb=112.0, nodes=4)
    closed = job.setup_hours + sr.expected_train_wall_hours(job)
    sim = sr.spot_risk_summary(job, spot_hourly_usd=1.0, on_demand_hourly_usd=None, deadline_hours=None,
                               seed=7, trials=4000)
    assert sim["expected_reclaims"] > 0.5
    assert sim["expected_hours"] == pytest.approx(closed, rel=0.03)
    assert sim["p90_hours"] > sim["p50_hours"] >= job.setup_hours + job.train_hours
    assert sim["p_meets_deadline"] is None and sim["fallback"] is None


def test_a_run_of_millions_of_hours_follows_a_bounded_number_of_reclaims() -> None:
    """A request may ask for 1e14 tokens: runs that long would make the lockstep loop turn once per
    reclaim, millions of times. After ``MAX_SIMULATED_RECLAIMS`` the runs still on spot finish at the
    expected rate, the draws stop there, and the summary says so."""
    job = _job(train=2e6, ckpt_gb=112.0, nodes=4)
    assert job.job_rate * job.train_hours > 10 * sr.MAX_SIMULATED_RECLAIMS  # far past the bound
    steps: list[int] = []
    rng = np.random.default_rng(3)

    def draw(live: np.ndarray, step: int) -> np.ndarray:
        steps.append(step)
        return rng.standard_exponential(live.size)

    runs = sr._trials(job, None, False, 400, draw)
    assert len(steps) == sr.MAX_SIMULATED_RECLAIMS and runs.finished_expected == 400
    closed = job.setup_hours + sr.expected_train_wall_hours(job)
    assert float(runs.hours.mean()) == pytest.approx(closed, rel=0.01)
    assert runs.hours.min() >= job.setup_hours + job.train_hours
    assert float(runs.reclaims.mean()) == pytest.approx(job.job_rate * sr.expected_train_wall_hours(job), rel=0.02)
    s = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=None, deadline_hours=None, seed=2)
    assert "finished at the expected rate" in s["method"] and s["expected_hours"] == pytest.approx(closed, rel=0.01)
    # Under the can't-be-late policy they go on demand from their last reclaim instead.
    guarded = sr._trials(job, 3e6, True, 400, lambda live, _step: rng.standard_exponential(live.size))
    assert guarded.finished_expected > 0 and bool(guarded.fell_back.all())
    assert float(guarded.hours.max()) <= 3e6
    # A job of ordinary length never reaches the bound: every run is simulated to its end.
    short = sr.spot_risk_summary(_job(train=20.0, ckpt_gb=112.0, nodes=4), spot_hourly_usd=3.0,
                                 on_demand_hourly_usd=None, deadline_hours=None, seed=2)
    assert short["method"] == f"seeded simulation, {sr.SIMULATION_TRIALS} runs"


def test_simulation_is_seeded() -> None:
    job = _job(train=20.0, ckpt_gb=112.0, nodes=4)
    a = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=9.0, deadline_hours=30, seed=11)
    b = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=9.0, deadline_hours=30, seed=11)
    c = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=9.0, deadline_hours=30, seed=12)
    assert a == b and a != c


def test_fallback_meets_the_deadline_where_spot_alone_often_does_not() -> None:
    job = _job(train=20.0, ckpt_gb=112.0, nodes=4)
    deadline = 27.0
    alone = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=None, deadline_hours=deadline, seed=3)
    guarded = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=9.0, deadline_hours=deadline, seed=3)
    assert alone["p_meets_deadline"] < 0.9
    assert guarded["p_meets_deadline"] >= 0.99 and guarded["fallback"] == "on_demand"
    assert 0 < guarded["p_fallback"] < 1
    # The cost distribution counts the on-demand hours it fell back to.
    assert guarded["p90_cost_usd"] > alone["p50_cost_usd"]
    assert guarded["expected_cost_usd"] > alone["expected_cost_usd"] * 0.9


def test_a_deadline_with_no_room_for_a_reclaim_starts_on_demand() -> None:
    job = _job(train=20.0, ckpt_gb=112.0)
    s = sr.spot_risk_summary(job, spot_hourly_usd=3.0, on_demand_hourly_usd=9.0, deadline_hours=20.5, seed=1)
    assert s["p_fallback"] == 1.0 and s["p_meets_deadline"] == 1.0
    assert s["expected_cost_usd"] == pytest.approx((0.2 + 20.0) * 9.0)


def test_a_risky_bucket_costs_more_than_its_price_ratio_and_can_lose_to_on_demand() -> None:
    # p3.16xlarge in eu-west-2: Spot Advisor ">20%" with savings 0; spot min = max = on demand = 28.712
    # USD/h in the same export (2025-11-30).
    rate = sr.spot_rate("aws", "eu-west-2", "p3.16xlarge")
    assert rate.bucket == ">20%"
    job = sr.SpotJob(8.0, 0.2, 1, rate, 0.6)
    s = sr.spot_risk_summary(job, spot_hourly_usd=28.712, on_demand_hourly_usd=28.712, deadline_hours=None, seed=5)
    assert s["price_ratio"] == 1.0
    assert s["expected_cost_ratio"] > s["price_ratio"]
    assert s["expected_cost_usd"] > s["on_demand_cost_usd"]


@pytest.mark.parametrize(("train", "ckpt_gb", "nodes", "deadline", "od_price", "interval"), [
    (20.0, 112.0, 4, None, None, None),   # spot to the end, loses work at each reclaim
    (20.0, 0.6, 4, None, None, None),     # saves on notice
    (20.0, 112.0, 4, 27.0, 9.0, None),    # can't-be-late: falls back in some runs
    (20.0, 112.0, 4, 24.0, 9.0, 2.0),     # fixed interval, tight deadline
    (20.0, 112.0, 1, 20.5, 9.0, None),    # no room for a reclaim: on demand from the start
    (3.0, 5.0, 8, 6.0, 9.0, None),
])
def test_the_lockstep_simulation_ends_every_run_as_the_one_run_policy_does(
    train: float, ckpt_gb: float, nodes: int, deadline: float | None, od_price: float | None,
    interval: float | None,
) -> None:
    """Fed the same Exp(1) draws, ``_trials`` (every run at once) and ``_trial`` (one run, one
    reclaim at a time) agree on each run's spot hours, on-demand hours, fallback and reclaims."""
    job = _job(train=train, ckpt_gb=ckpt_gb, nodes=nodes, interval=interval)
    n = 300
    draws = np.random.default_rng(5).standard_exponential((n, 400))
    fallback = deadline is not None and od_price is not None
    runs = sr._trials(job, deadline, fallback, n, lambda live, step: draws[live, step])
    assert runs.reclaims.max() < 400
    for i in range(n):
        one = sr._trial(job, deadline, fallback, _Draws(draws[i]))  # type: ignore[arg-type]
        assert runs.spot_hours[i] == pytest.approx(one.spot_hours, rel=1e-12, abs=1e-12), i
        assert runs.on_demand_hours[i] == pytest.approx(one.on_demand_hours, rel=1e-12, abs=1e-12), i
        assert bool(runs.fell_back[i]) == one.fell_back, i
        assert int(runs.reclaims[i]) == one.reclaims, i
    # Each case exercises reclaims, or is the one that starts on demand.
    assert runs.reclaims.sum() > 0 or (runs.fell_back.all() and runs.spot_hours.max() == 0)


class _Draws:
    """``random.Random``'s ``expovariate`` from a fixed row of Exp(1) draws (one per reclaim)."""

    def __init__(self, row: np.ndarray) -> None:
        self._row = iter(row.tolist())

    def expovariate(self, lam: float) -> float:
        return next(self._row) / lam
