"""Issue 19: a CPU-short host slows an option to what its cores (or GPU JPEG decoding) can feed,
with a note; only below the seeds' 70 % floor is it rejected. Real estimator, synthetic offers."""

from __future__ import annotations

import pytest

from optimizer.candidates import NO_HOST_CPU, generate
from optimizer.candidates.estimator import job_host
from optimizer.candidates.feeding import gpu_decode_core_share, has_jpeg_decoder
from optimizer.estimator.estimate import estimate
from optimizer.estimator.workload import Constraints, Workload
from tests.unit.decide_fakes import offer

RESNET = Workload(model="resnet50", samples=1e7, global_batch_size=256)
C = Constraints(include_local=False)


def _only(gpu: str, vcpus: float) -> list:  # type: ignore[type-arg]
    cs = generate(RESNET, C, [offer("box", gpu, 8, 20.0, vcpus=vcpus, ram_gb=2048)], [],
                  estimator=estimate, top=5)
    return [c for c in cs.ranked if c.nodes == 1], cs  # type: ignore[return-value]


def _cores(gpu: str) -> float:
    return job_host(estimate(RESNET, gpu, 8)).cpu_cores


def test_a_cpu_short_host_runs_slower_with_a_note() -> None:
    need = _cores("V100")  # no hardware JPEG decoder: the cores decode
    assert not has_jpeg_decoder("V100")
    (fed,), _ = _only("V100", 4 * need)
    (short,), _ = _only("V100", round(0.8 * need))
    share = round(0.8 * need) / need
    setup = job_host(estimate(RESNET, "V100", 8)).setup_hours  # billed once, the same on both
    assert short.hours - setup == pytest.approx((fed.hours - setup) / share, rel=1e-6)
    assert short.cost_usd > fed.cost_usd
    assert any(w.startswith("host feeding:") and f"{share:.0%}" in w for w in short.warnings)


def test_below_the_70_percent_floor_it_is_rejected() -> None:
    need = _cores("V100")
    got, cs = _only("V100", round(0.5 * need))
    assert got == [] and cs.rejected.counts == {NO_HOST_CPU: 1}


def test_gpu_jpeg_decoding_feeds_a100_nodes_from_fewer_cores() -> None:
    need = _cores("A100")
    vcpus = round(0.5 * need)
    assert vcpus >= need * gpu_decode_core_share(224)  # decoding on the GPU leaves only augmentation
    (fed,), _ = _only("A100", 4 * need)
    (short,), _ = _only("A100", vcpus)
    assert short.hours == pytest.approx(fed.hours)
    assert any("GPU JPEG decoding (DALI/nvJPEG)" in w for w in short.warnings)


def test_a_cpu_short_build_runs_slower_and_below_the_floor_is_rejected() -> None:
    from tests.unit.decide_fakes import build

    need = job_host(estimate(RESNET, "RTX4090", 1)).cpu_cores
    assert not has_jpeg_decoder("RTX4090")

    def local(cores: int):  # type: ignore[no-untyped-def]
        cs = generate(RESNET, Constraints(providers=["local"]), [], [build("b", "RTX4090", 2500, cores=cores)],
                      estimator=estimate, top=5)
        return [c for c in cs.ranked if c.nodes == 1], cs

    (fed,), _ = local(int(4 * need))
    (short,), _ = local(round(0.8 * need))
    assert short.hours > fed.hours and any(w.startswith("host feeding:") for w in short.warnings)
    got, cs = local(round(0.5 * need))
    assert got == [] and NO_HOST_CPU in cs.rejected.counts
