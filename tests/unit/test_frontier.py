from __future__ import annotations

from optimizer.frontier import frontier
from optimizer.estimator.workload import Constraints
from tests.unit.decide_fakes import AS_OF, WORKLOAD, FakeEstimator, brute_force_single, build, offer, shardings

OFFERS = [offer("a10g-1", "A10G", 1, 1.0), offer("a100-8", "A100", 8, 30.0), offer("h100-8", "H100", 8, 90.0),
          offer("a100-1", "A100", 1, 3.5, provider="gcp")]
BUILDS = [build("b4090", "RTX4090", 2400)]


def test_frontier_is_pareto_and_covers_every_choice() -> None:
    est = FakeEstimator()
    f = frontier(WORKLOAD, Constraints(), OFFERS, BUILDS, runs=2, prices_as_of={"aws": AS_OF}, snapshot_id="t",
                 estimator=est, shardings=shardings)
    hours = [p.hours for p in f.points]
    cost = [p.cost_usd for p in f.points]
    assert hours == sorted(hours) and all(a > b for a, b in zip(cost, cost[1:]))
    assert all(p.usd_per_hour_saved is not None and p.usd_per_hour_saved > 0 for p in f.points[:-1])
    assert f.points[-1].usd_per_hour_saved is None
    every = brute_force_single(WORKLOAD, OFFERS, BUILDS, est, runs=2)
    for c in every:
        assert any(p.hours <= c.hours + 1e-3 and p.cost_usd <= c.cost_usd + 1e-3 for p in f.points)
    assert min(cost) == min(round(c.cost_usd, 4) for c in every)
    assert min(hours) == min(round(c.hours, 4) for c in every)


def test_frontier_empty_when_infeasible() -> None:
    from service.render.charts import frontier_chart

    f = frontier(WORKLOAD, Constraints(deadline_hours=0.01), OFFERS, BUILDS, prices_as_of={}, snapshot_id="t",
                 estimator=FakeEstimator(), shardings=shardings)
    assert f.points == [] and f.rejected
    assert frontier_chart(f, "png")[:4] == b"\x89PNG"  # an empty chart that says so, not an error


def test_frontier_chart() -> None:
    from service.render.charts import frontier_chart

    f = frontier(WORKLOAD, Constraints(), OFFERS, BUILDS, prices_as_of={}, snapshot_id="t",
                 estimator=FakeEstimator(), shardings=shardings)
    assert frontier_chart(f, "png")[:4] == b"\x89PNG"
