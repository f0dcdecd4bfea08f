from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.errors import InvalidInput
from optimizer.quote import quote
from optimizer.estimator.workload import Constraints, Workload
from tests.unit.decide_fakes import (
    AS_OF,
    WORKLOAD,
    FakeEstimator,
    brute_force_single,
    build,
    offer,
    shardings,
)

OFFERS = [
    offer("g5.xlarge", "A10G", 1, 1.0, ram_gb=16, vcpus=4),
    offer("g5.12xlarge", "A10G", 4, 5.6, ram_gb=192, vcpus=48),
    offer("p4d.24xlarge", "A100", 8, 32.0, spot=12.0),
    offer("a2-highgpu-1g", "A100", 1, 3.7, provider="gcp", region="us-central1", increment_s=60),
    offer("a2-highgpu-1g", "A100", 1, 3.9, provider="gcp", region="europe-west4", increment_s=60),
    offer("g4dn.xlarge", "T4", 1, 0.5),
    offer("p5.48xlarge", "H100", 8, 98.0),
]
BUILDS = [build("rtx4090", "RTX4090", 2500), build("rtx3090", "RTX3090", 1500, ram_gb=32)]


def run(c: Constraints | None = None, runs: int = 1, est: FakeEstimator | None = None, **kw: object):  # type: ignore[no-untyped-def]
    return quote(
        WORKLOAD, c or Constraints(), OFFERS, BUILDS, runs=runs, prices_as_of={"aws": AS_OF}, snapshot_id="test",
        estimator=est or FakeEstimator(), shardings=shardings, **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("runs", [1, 4, 40, 400])
@pytest.mark.parametrize("deadline", [None, 5.0, 100.0])
def test_best_is_the_brute_force_minimum(runs: int, deadline: float | None) -> None:
    est = FakeEstimator()
    q = run(Constraints(deadline_hours=deadline), runs=runs, est=est)
    every = brute_force_single(WORKLOAD, OFFERS, BUILDS, est, runs=runs, deadline=deadline)
    assert q.best is not None
    assert q.best.cost_usd == pytest.approx(min(c.cost_usd for c in every), abs=1e-3)
    assert q.fastest is not None
    assert q.fastest.hours == pytest.approx(min(c.hours for c in every), rel=1e-4)
    assert q.solver.status == "Optimal"


def test_many_runs_make_buying_win_and_few_make_renting_win() -> None:
    assert run(runs=1).best.kind == "cloud"  # type: ignore[union-attr]
    assert run(runs=2000).best.kind == "local"  # type: ignore[union-attr]


def test_options_ranked_cheapest_first_with_best_first() -> None:
    q = run(runs=3)
    costs = [o.cost_usd for o in q.options]
    assert q.best is not None and q.options[0] == q.best
    assert costs == sorted(costs)
    # With few alternatives shown, the cheapest purchase still gets the last row.
    few = run(runs=1, top=3)
    assert [o.kind for o in few.options] == ["cloud", "cloud", "local"]
    assert few.options[-1].cost_usd == min(o.cost_usd for o in run(runs=1, top=50).options if o.kind == "local")
    # The two gcp regions are distinct offers; zones of one region would be merged.
    assert len({(o.provider, o.region, o.instance_type, o.nodes, o.pricing) for o in q.options}) == len(q.options)


def test_infeasible_is_an_answer() -> None:
    q = run(Constraints(deadline_hours=0.05))
    assert q.best is None and q.options == []
    assert q.solver.status.startswith("Infeasible")
    reasons = {g.reason: g.count for g in q.rejected}
    assert reasons.get("misses deadline", 0) >= 1


def test_budget_rejects_and_reports() -> None:
    q = run(Constraints(budget_usd=12.0, include_local=False))
    assert q.best is not None and q.best.cost_usd <= 12.0
    assert any(g.reason == "over budget" for g in q.rejected)


def test_spot_only_when_allowed() -> None:
    assert all(o.pricing != "spot" for o in run().options)
    q = run(Constraints(allow_spot=True, gpus=["A100"], include_local=False))
    every = brute_force_single(WORKLOAD, OFFERS, [], FakeEstimator(), allow_spot=True)
    a100 = [c for c in every if "A100" in c.label or "a2-" in c.label or "p4d" in c.label]
    assert q.best is not None and q.best.cost_usd == pytest.approx(min(c.cost_usd for c in a100), abs=1e-3)


def test_constraints_filter_and_unknown_gpu_is_bad_input() -> None:
    q = run(Constraints(providers=["gcp"], include_local=False))
    assert q.best is not None and q.best.provider == "gcp"
    assert any(g.reason == "excluded by constraints" for g in q.rejected)
    with pytest.raises(InvalidInput) as exc:
        run(Constraints(gpus=["A1OO-typo"]))
    assert exc.value.field == "constraints.gpus"


def test_quote_on_the_reference_catalog_with_the_real_estimator(reference_dir: Path) -> None:
    from pricing.adapters.skypilot_csv import load_skypilot

    offers = load_skypilot(reference_dir / "skypilot-catalog")
    w = Workload(model="llama-3-8b", method="qlora", tokens=1e8, micro_batch_size=4, seq_len=2048,
                 gradient_checkpointing=True)
    q = quote(w, Constraints(include_local=False), offers, [], runs=1, prices_as_of={}, snapshot_id="ref")
    assert q.best is not None and q.solver.status == "Optimal"
    assert q.best.memory_need_gb_per_gpu <= q.best.vram_gb_per_gpu * 2**30 / 1e9
    by_reason = {g.reason: g.count for g in q.rejected}
    assert by_reason.get("insufficient VRAM", 0) > 0  # T4 / V100-16GB rows cannot hold it
    assert [o.cost_usd for o in q.options] == sorted(o.cost_usd for o in q.options)


def test_solver_status_is_reported_for_a_time_limited_solve() -> None:
    import pulp

    from optimizer.ilp.solve import solve

    # A 0/1 knapsack with correlated weights and values: hard enough that 1 ms is not enough.
    prob = pulp.LpProblem("knapsack", pulp.LpMaximize)
    xs = [pulp.LpVariable(f"x{i}", cat=pulp.LpBinary) for i in range(400)]
    w = [1000 + (i * 7919) % 997 for i in range(400)]
    prob += pulp.lpSum((wi + 100) * x for wi, x in zip(w, xs)), "value"
    prob += pulp.lpSum(wi * x for wi, x in zip(w, xs)) <= sum(w) // 2 + 1, "capacity"
    res = solve(prob, time_limit_s=0.001)
    assert res.time_limit_s == 0.001
    assert res.status in ("Optimal", "Feasible (time limit)", "Not Solved (time limit)")
    if res.status != "Optimal":
        # Time-limited answers never claim optimality, and only an incumbent comes with values.
        assert (res.objective is not None) == (res.status == "Feasible (time limit)")
    full = solve(prob, time_limit_s=30)
    assert full.status == "Optimal" and full.gap is not None and full.gap <= 1e-4 + 1e-12
