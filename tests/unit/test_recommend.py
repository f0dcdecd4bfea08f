from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.estimator.workload import Workload
from optimizer.offer import Part
from optimizer.recommend import MIN_CPU_CORES, MIN_RAM_GB, compose_builds, recommend
from tests.unit.decide_fakes import AS_OF, SYNTHETIC, WORKLOAD, FakeEstimator, build, offer, shardings

OFFERS = [offer("a100-1", "A100", 1, 3.0), offer("a10g-1", "A10G", 1, 1.0)]


def part(pid: str, cat: str, price: float, **specs: float | str) -> Part:
    return Part(id=pid, category=cat, name=pid, price_usd=price, source=SYNTHETIC, as_of=AS_OF, specs=specs)


PARTS = [
    part("gpu-3060", "gpu", 300, gpu="RTX3060"), part("gpu-3090", "gpu", 700, gpu="RTX3090"),
    part("gpu-4090", "gpu", 1700, gpu="RTX4090"),
    part("cpu-6c", "cpu", 150, cores=6, tdp_w=65), part("cpu-8c", "cpu", 300, cores=8, tdp_w=105),
    part("cpu-16c", "cpu", 600, cores=16, tdp_w=170),
    part("ram-16", "ram", 60, gb=16), part("ram-32", "ram", 100, gb=32), part("ram-64", "ram", 250, gb=64),
    part("ssd-1tb", "storage", 60, gb=1000), part("board", "board", 150), part("psu-650", "psu", 70, watts=650),
    part("psu-1000", "psu", 180, watts=1000), part("case", "case", 80),
]


def run(builds, **kw):  # type: ignore[no-untyped-def]
    return recommend(WORKLOAD, builds, OFFERS, estimator=FakeEstimator(**kw.pop("est", {})), shardings=shardings, **kw)


def test_cheapest_balanced_build_wins_and_unbalanced_ones_say_why() -> None:
    builds = [
        build("cheap-but-starved", "RTX3090", 1200, ram_gb=16),  # RAM below the seeds' 32 GB
        build("balanced-3090", "RTX3090", 1600, ram_gb=64),
        build("balanced-4090", "RTX4090", 2600, ram_gb=64),
        build("too-small", "RTX3060", 800),  # 12 GB: 20 GB does not fit
    ]
    r = run(builds)
    assert r.recommendation is not None and r.recommendation.build_id == "balanced-3090"
    starved = next(a for a in r.alternatives if a.build_id == "cheap-but-starved")
    assert not starved.balanced and any(w.startswith("ram") for w in starved.warnings)
    assert {g.reason for g in r.rejected} == {"insufficient VRAM"}
    cats = [c.category for c in r.recommendation.components]
    assert cats[:4] == ["gpu", "cpu", "ram", "storage"]
    assert all(c.why and c.need for c in r.recommendation.components[:4])
    assert r.best_rental is not None and r.best_rental.instance_type == "a10g-1"
    assert r.recommendation.breakeven_runs is not None


def test_budget_and_deadline() -> None:
    builds = [build("b3090", "RTX3090", 1600), build("b4090", "RTX4090", 2600)]
    assert run(builds, budget_usd=1000).recommendation is None
    # 9 h on a 3090 vs 6 h on a 4090 (the fake's table): a 7 h deadline needs the 4090.
    r = run(builds, deadline_hours=7)
    assert r.recommendation is not None and r.recommendation.build_id == "b4090"


def test_compose_builds_meets_the_rules_at_least_cost() -> None:
    est = FakeEstimator(ram_gb=40.0, cores=4)
    r = recommend(WORKLOAD, [], OFFERS, parts=PARTS, estimator=est, shardings=shardings)
    rec = r.recommendation
    assert rec is not None and rec.origin == "composed from parts"
    # 20 GB does not fit the 3060; the 3090 is the cheapest card that does.
    assert rec.gpu == "RTX3090"
    names = {c.category: c for c in rec.components}
    assert names["cpu"].part_id == "cpu-8c"  # the 6-core part breaks the >= 8 cores rule
    # 40 GB needed: three 16 GB kits ($180) beat two 32 GB kits ($200) and one 64 GB kit ($250).
    assert names["ram"].part_id == "ram-16"


def test_compose_picks_cheapest_ram_fill() -> None:
    from optimizer.recommend import Needs

    needs = Needs(vram_gb_per_gpu=10, ram_gb=40, cpu_cores=4, disk_gb=500, tokens_per_second=1000)
    (b, *_) = [b for b in compose_builds(PARTS, needs) if b.gpu == "RTX3090"]
    assert b.cpu_cores >= MIN_CPU_CORES and b.ram_gb >= max(MIN_RAM_GB, 40)
    ram_cost = sum(p.price_usd for p in b.parts if p.category == "ram")
    assert ram_cost == 180  # 3 x 16 GB ($180) < 2 x 32 GB ($200) < 1 x 64 GB ($250)
    psu = next(p for p in b.parts if p.category == "psu")
    assert psu.id == "psu-1000"  # 350 W card + 105 W CPU + 100 W rest = 555 W > 80 % of 650 W
    assert b.price_usd == pytest.approx(sum(p.price_usd for p in b.parts))


def test_recommend_on_the_bundled_catalog() -> None:
    from pricing.adapters.local import bundled_parts
    from pricing.snapshot.loader import load_bundled

    snap = load_bundled()
    w = Workload(model="llama-3-8b", method="qlora", tokens=1e8, micro_batch_size=2, seq_len=2048,
                 gradient_checkpointing=True)
    r = recommend(w, snap.builds, snap.offers, parts=list(bundled_parts()), budget_usd=5000)
    assert r.recommendation is not None
    assert r.recommendation.price_usd <= 5000
    assert r.recommendation.memory_need_gb_per_gpu <= r.recommendation.vram_gb_per_gpu * 2**30 / 1e9
    assert r.best_rental is not None


def test_reference_dir_is_not_needed(tmp_path: Path) -> None:
    # recommend() runs on arguments alone: no file access, no store.
    r = run([build("b", "RTX4090", 2000)])
    assert r.recommendation is not None
