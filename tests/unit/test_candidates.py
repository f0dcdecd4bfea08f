from __future__ import annotations

import pytest

from optimizer.candidates import (
    LATE,
    NO_HOST_RAM,
    NO_PRICE,
    NO_VRAM,
    UNKNOWN_GPU,
    default_estimator,
    generate,
    pareto,
)
from optimizer.estimator.workload import Constraints
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, brute_force_single, build, offer, shardings


def gen(offers, builds=(), c=None, est=None, workload=WORKLOAD, **kw):  # type: ignore[no-untyped-def]
    return generate(workload, c or Constraints(), offers, list(builds), estimator=est or FakeEstimator(),
                    shardings=shardings, **kw)


def test_estimator_runs_once_per_configuration_not_per_offer() -> None:
    est = FakeEstimator()
    # 40 one-GPU offers in different regions and zones, and 10 eight-GPU offers.
    offers = [offer(f"a2-{i}", "A100", 1, 3.0 + i / 100, region=f"r{i % 5}", zone=f"z{i}") for i in range(40)]
    offers += [offer(f"p4d-{i}", "A100", 8, 30.0 + i, region=f"r{i}", fabric=True) for i in range(10)]
    cs = gen(offers, est=est, c=Constraints(include_local=False))
    assert len(est.calls) == len(set(est.calls))
    # One estimate for 1 GPU; 8-GPU instances on 1..4 nodes (8, 16, 24, 32 GPUs) under ddp only:
    # ``auto`` takes the lightest scheme that fits (issue 19). 24 and 32 GPUs train the global batch
    # of 16 on the 16 GPUs that divide it (the estimate for 16 is shared), the rest idle.
    assert sorted(n for _, n, _ in est.calls) == [1, 8, 16]
    assert {sh for _, n, sh in est.calls if n > 1} == {"ddp"}
    assert cs.feasible_offers == 50
    # A fixed scheme is passed through as asked.
    est2 = FakeEstimator()
    gen(offers, est=est2, c=Constraints(include_local=False), workload=WORKLOAD.model_copy(update={"sharding": "zero2"}))
    assert {sh for _, n, sh in est2.calls if n > 1} == {"zero2"}


def test_rejection_reasons_and_counts() -> None:
    est = FakeEstimator(mem_gb=30.0)
    offers = [
        offer("t4", "T4", 1, 0.5),  # 16 GB card, one per box: 30 GB cannot fit
        offer("t4-8", "T4", 8, 4.0, fabric=True),  # eight of them: ZeRO-3 fits (30 / 8 + 1 GB each)
        offer("small-host", "A100-80GB", 1, 1.0, ram_gb=8),
        offer("weird", "Z9000-unknown", 1, 1.0, vram_gb=40),
        offer("unpriced", "A100", 1, None, spot=None),
    ]
    cs = gen(offers, est=est, c=Constraints(include_local=False))
    assert cs.rejected.counts == {UNKNOWN_GPU: 1, NO_PRICE: 1, NO_HOST_RAM: 1, NO_VRAM: 1}
    assert cs.rejected.examples[NO_VRAM] == ["aws/t4"]
    assert cs.feasible_offers == 1
    (only,) = cs.ranked
    assert only.instance_type == "t4-8" and only.sharding == "zero3"


def test_deepest_reason_wins() -> None:
    est = FakeEstimator(mem_gb=30.0)
    t4 = [offer("t4-8", "T4", 8, 4.0, fabric=True)]
    # It fits only with ZeRO-3, and even on 4 nodes that takes over 1 h: "misses deadline", not VRAM.
    # (Past 2 nodes the 16 GPUs that divide the global batch of 16 train: about 2.4 h at best.)
    cs = gen(t4, est=est, c=Constraints(include_local=False, deadline_hours=1.0))
    assert cs.rejected.counts == {LATE: 1}
    cs = gen(t4, est=est, c=Constraints(include_local=False, deadline_hours=3.0))
    assert cs.pareto and all(c.hours <= 3.0 for c in cs.pareto)


def test_pareto_set_is_exactly_the_non_dominated_brute_force_choices() -> None:
    est = FakeEstimator()
    offers = [
        offer("a10g-1", "A10G", 1, 1.0), offer("a10g-4", "A10G", 4, 5.5), offer("a100-8", "A100", 8, 30.0, fabric=True),
        offer("a100-1", "A100", 1, 3.5, provider="gcp", increment_s=60), offer("h100-8", "H100", 8, 90.0, fabric=True),
    ]
    builds = [build("b4090", "RTX4090", 2400)]
    cs = gen(offers, builds, est=est)
    every = brute_force_single(WORKLOAD, offers, builds, est)
    front = [(c.hours, c.cost_usd) for c in cs.pareto]
    for c in every:
        # Nothing enumerated beats a frontier point on both axes ...
        assert any(h <= c.hours + 1e-9 and k <= c.cost_usd + 1e-9 for h, k in front)
    for h, k in front:
        # ... and every frontier point is one of the enumerated choices, not dominated by another.
        assert any(abs(c.hours - h) < 1e-6 and abs(c.cost_usd - k) < 1e-6 for c in every)
        assert not any(c.hours < h - 1e-9 and c.cost_usd < k - 1e-9 for c in every)


def test_pareto_helper_sorts_and_drops_dominated() -> None:
    cs = gen([offer("a", "A100", 8, 30.0, fabric=True), offer("b", "A100", 8, 31.0, fabric=True)], c=Constraints(include_local=False))
    pts = pareto(cs.pareto)
    assert [p.hours for p in pts] == sorted(p.hours for p in pts)
    assert all(a.cost_usd > b.cost_usd for a, b in zip(pts, pts[1:]))
    assert all(p.instance_type == "a" for p in pts)  # the dearer twin never survives


def test_local_units_never_shard_one_model_over_ethernet() -> None:
    est = FakeEstimator(mem_gb=40.0)  # on two 24 GB cards only ZeRO-3 (20 + 1 GB each) would fit
    cs = gen([], [build("b", "RTX4090", 2000)], est=est)
    assert cs.pareto == [] and cs.rejected.counts == {NO_VRAM: 1}


def test_local_lead_time_counts_against_the_deadline() -> None:
    b = build("b", "RTX4090", 2000, lead_days=3)
    assert gen([], [b], c=Constraints(deadline_hours=24)).rejected.counts == {LATE: 1}
    assert gen([], [b], c=Constraints(deadline_hours=24 * 4)).pareto


def test_ranked_merges_zones_and_sorts() -> None:
    offers = [offer("x", "A100", 1, 3.0, zone=z) for z in ("a", "b", "c")] + [offer("y", "A100", 1, 2.0)]
    cs = gen(offers, c=Constraints(include_local=False), top=10)
    assert [c.instance_type for c in cs.ranked] == ["y", "x"]


@pytest.mark.parametrize("gpn", [0.25, 0.5])
def test_gpu_partitions_run_at_their_share(gpn: float) -> None:
    est = FakeEstimator(mem_gb=4.0)
    cs = gen([offer("g6f", "L4", gpn, 0.3, vram_gb=24 * gpn)], est=est, c=Constraints(include_local=False))
    (c,) = cs.ranked
    assert c.nodes == 1
    assert c.hours == pytest.approx(0.1 + est.single_gpu_hours["L4"] / gpn)


def test_zero3_is_tried_when_lighter_schemes_do_not_fit() -> None:
    """Llama-2-7B full fine-tuning needs ZeRO-3 to fit two 24 GB cards (real estimator)."""
    from optimizer.estimator.workload import Workload

    w = Workload(model="llama-2-7b", precision="bf16-true", optimizer="adamw_8bit", micro_batch_size=1,
                 seq_len=512, gradient_checkpointing=True)
    offers = [offer("2x-4090", "RTX4090", 2, 0.8, provider="vast", ram_gb=256, vcpus=32)]
    cs = generate(w, Constraints(include_local=False), offers, [], estimator=default_estimator())
    assert [c.sharding for c in cs.ranked] == ["zero3"]
    assert cs.ranked[0].memory_need_gb_per_gpu <= 24


def test_multi_node_only_where_the_offer_has_an_inter_node_fabric() -> None:
    est = FakeEstimator()
    plain = gen([offer("8x-a100-market", "A100", 8, 30.0, provider="vast", fabric=False)], est=est,
                c=Constraints(include_local=False))
    assert {c.nodes for c in plain.pareto} == {1} and {n for _, n, _ in est.calls} == {8}
    fabric = gen([offer("p4d.24xlarge", "A100", 8, 30.0)], c=Constraints(include_local=False))
    assert max(c.nodes for c in fabric.pareto) > 1  # p4d: EFA, as the offer derives from its type


def test_setup_is_counted_once() -> None:
    est = FakeEstimator(setup_hours=0.25)
    (c,) = gen([offer("a100", "A100", 1, 2.0)], est=est, c=Constraints(include_local=False)).ranked
    # The estimate's 4 h + 0.25 h: billed 4.25 h, not plus another setup allowance.
    storage = c.breakdown.get("storage_usd", 0.0)
    assert c.hours == pytest.approx(4.25) and c.cost_per_run_usd - storage == pytest.approx(2.0 * 4.25)
    assert c.breakdown["setup_usd"] == pytest.approx(0.5)


def test_rentals_need_only_the_jobs_host_not_the_build_floors() -> None:
    from optimizer.estimator.workload import Workload

    w = Workload(model="bert-base", tokens=1e8)
    e = default_estimator()(w, "T4", 1, None)
    assert e.host.ram_gb >= 32  # the estimator's advice floor for a build
    small = [offer("g4dn.xlarge", "T4", 1, 0.526, ram_gb=16, vcpus=4)]
    cs = gen(small, est=default_estimator(), c=Constraints(include_local=False), workload=w)
    assert [c.instance_type for c in cs.ranked] == ["g4dn.xlarge"] and not cs.rejected.counts


def test_purchases_buy_the_machines_the_runs_need() -> None:
    est = FakeEstimator()
    b = build("b4090", "RTX4090", 2500)
    (one,) = gen([], [b], est=est, runs=1).ranked
    assert one.machines == 1 and one.capex_usd == 2500
    # 6.1 h a run; 36 months x 730 h x 80 % = 21,024 h per machine: 5,000 runs need two.
    many = [c for c in gen([], [b], est=est, runs=5000, assumptions=None).ranked if c.nodes == 1][0]
    assert many.machines == 2 and many.capex_usd == 5000
    assert many.utilization == pytest.approx(5000 * 6.1 / (2 * 730 * 36), rel=1e-6)
    assert many.outlay_usd == pytest.approx(5000 + many.cost_per_run_usd * 5000)
    tooth = gen([], [b], est=est, runs=400_000)
    assert not tooth.ranked and "needs more machines than allowed" in tooth.rejected.counts


def test_budget_caps_the_cash_paid_not_the_cost_net_of_resale() -> None:
    b = build("b4090", "RTX4090", 2500, resale=0.4)
    # Net of resale the build costs ~$1,500 for one run, but $2,500 must be paid.
    assert not gen([], [b], c=Constraints(budget_usd=2000)).ranked
    ok = gen([], [b], c=Constraints(budget_usd=2600)).ranked
    assert ok and all(c.outlay_usd <= 2600 for c in ok)


@pytest.mark.parametrize("order", [1, -1])
def test_offers_rank_by_compute_plus_storage_whatever_their_order(order: int) -> None:
    # Same hourly price; the cheaper block storage decides, in either order of arrival.
    gcp = offer("a2-a10g", "A10G", 1, 2.0, provider="gcp").model_copy(update={"storage_usd_per_gb_month": 0.10})
    aws = offer("g5.xlarge", "A10G", 1, 2.0, provider="aws").model_copy(update={"storage_usd_per_gb_month": 0.08})
    cs = gen([gcp, aws][::order], c=Constraints(include_local=False))
    best = min(cs.pareto, key=lambda c: c.cost_per_run_usd)
    assert best.provider == "aws"
    assert best.breakdown["storage_usd"] > 0
