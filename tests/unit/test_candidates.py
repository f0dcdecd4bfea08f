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
    offers += [offer(f"p4d-{i}", "A100", 8, 30.0 + i, region=f"r{i}") for i in range(10)]
    cs = gen(offers, est=est, c=Constraints(include_local=False))
    assert len(est.calls) == len(set(est.calls))
    # One estimate for 1 GPU; 8-GPU instances on 1..4 nodes (8, 16, 24, 32 GPUs) under ddp and
    # zero2: zero3 is not tried once zero2 fits (same compute, more traffic).
    assert sorted(n for _, n, _ in est.calls) == [1] + [8] * 2 + [16] * 2 + [24] * 2 + [32] * 2
    assert {sh for _, n, sh in est.calls if n > 1} == {"ddp", "zero2"}
    assert cs.feasible_offers == 50
    # A fixed scheme is passed through as asked.
    est2 = FakeEstimator()
    gen(offers, est=est2, c=Constraints(include_local=False), workload=WORKLOAD.model_copy(update={"sharding": "zero2"}))
    assert {sh for _, n, sh in est2.calls if n > 1} == {"zero2"}


def test_rejection_reasons_and_counts() -> None:
    est = FakeEstimator(mem_gb=30.0)
    offers = [
        offer("t4", "T4", 1, 0.5),  # 16 GB card, one per box: 30 GB cannot fit
        offer("t4-8", "T4", 8, 4.0),  # eight of them: ZeRO-3 fits (30 / 8 + 1 GB each)
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
    t4 = [offer("t4-8", "T4", 8, 4.0)]
    # It fits only with ZeRO-3, and even on 4 nodes that takes over 1 h: "misses deadline", not VRAM.
    cs = gen(t4, est=est, c=Constraints(include_local=False, deadline_hours=1.0))
    assert cs.rejected.counts == {LATE: 1}
    cs = gen(t4, est=est, c=Constraints(include_local=False, deadline_hours=2.0))
    assert cs.pareto and all(c.hours <= 2.0 for c in cs.pareto)


def test_pareto_set_is_exactly_the_non_dominated_brute_force_choices() -> None:
    est = FakeEstimator()
    offers = [
        offer("a10g-1", "A10G", 1, 1.0), offer("a10g-4", "A10G", 4, 5.5), offer("a100-8", "A100", 8, 30.0),
        offer("a100-1", "A100", 1, 3.5, provider="gcp", increment_s=60), offer("h100-8", "H100", 8, 90.0),
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
    cs = gen([offer("a", "A100", 8, 30.0), offer("b", "A100", 8, 31.0)], c=Constraints(include_local=False))
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
