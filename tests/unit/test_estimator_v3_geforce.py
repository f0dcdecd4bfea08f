"""GeForce cards' tensor-core matmuls run above the rated boost clock their datasheet peak assumes
(``calibration.GEFORCE_GEMM_ATTAINABLE``), and what that does to the consumer rows left out.

Published figures used here, copied with their source: mli/transformers-benchmarks README
(2022) micro-benchmark, fp16 matmul TFLOPS measured / datasheet: A100-80GB 230 / 312, RTX 3090 Ti
81 / 80 (FP32 accumulate); the measured rows are in tests/data/measurements_extra.jsonl and
tests/data/reference/measurement_cases.jsonl.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from types import ModuleType

import pytest

from optimizer.estimator import calibration as cal
from optimizer.estimator.estimate import estimate
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.throughput import gemm_attainable, matmul_efficiency
from optimizer.estimator.workload import Workload
from tests.unit.accuracy_bench import estimator_accuracy

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
# Every RTX (GeForce) throughput row the bench scores: Lambda's BERT (M121, M125, M128) and
# ResNet-50 (V023, V024, V029, V030) runs and timm's RTX 3090 rows (V007, V008).
GEFORCE_ROWS = ("M121", "M125", "M128", "V007", "V008", "V023", "V024", "V029", "V030")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return estimator_accuracy()


@pytest.fixture(scope="module")
def cases(bench: ModuleType) -> list:
    files = (DATA / "reference" / "measurement_cases.jsonl", DATA / "measurements_extra.jsonl")
    return bench.load_cases(files, DATA / "measurements_adjustments.jsonl")


def test_geforce_share_keeps_the_measured_ratio_to_datacenter_ampere() -> None:
    # Same notebook: RTX 3090 Ti 81 of 80 TFLOPS, A100-80GB 230 of 312.
    ratio = (81 / 80) / (230 / 312)
    assert cal.GEFORCE_GEMM_ATTAINABLE.value == pytest.approx(cal.GEMM_ATTAINABLE["ampere"].value * ratio, abs=0.01)
    assert "transformers-benchmarks" in cal.GEFORCE_GEMM_ATTAINABLE.source
    assert not cal.GEFORCE_GEMM_ATTAINABLE.fitted_on  # from the sources, not fitted


def test_only_geforce_tensor_core_matmuls_get_it() -> None:
    bert, resnet = resolve_model("bert-base"), resolve_model("resnet50")
    m = cal.MATMUL_EFFICIENCY.value
    geforce = cal.GEFORCE_GEMM_ATTAINABLE.value
    for name in ("RTX3090", "RTX4090", "RTX5090"):
        spec = gpu_spec(name)
        for precision in ("fp16", "bf16", "auto"):
            assert matmul_efficiency(spec, bert, precision) == pytest.approx(m * geforce), (name, precision)
        # Plain fp32 matmuls run on the CUDA cores, which do not beat their datasheet figure ...
        assert matmul_efficiency(spec, bert, "fp32") == pytest.approx(m * gemm_attainable(spec, False))
        assert gemm_attainable(spec, False) == cal.GEMM_ATTAINABLE[spec.generation].value
        # ... but fp32 convolutions run in TF32 on the tensor cores (cuDNN's default from Ampere on).
        assert matmul_efficiency(spec, resnet, "fp32") == pytest.approx(m * geforce * cal.CONV_EFFICIENCY_SHARE.value)
    # Workstation and datacenter cards of the same generations keep their generation's share.
    for name, gen in (("RTXA6000", "ampere"), ("A10", "ampere"), ("A100-80GB", "ampere"), ("L40S", "ada"),
                      ("RTX6000Ada", "ada"), ("V100", "volta")):
        assert matmul_efficiency(gpu_spec(name), bert, "fp16") == pytest.approx(m * cal.GEMM_ATTAINABLE[gen].value)


def test_same_chip_geforce_card_is_faster_than_its_datasheet_says() -> None:
    # BERT-base fp16, batch 96 x 384 (Lambda's recipe): the RTX 3090's fp16 tensor peak (FP32
    # accumulate, 71 TFLOPS) is 0.57 of the A10's 125 from the same GA102 chip; its matmuls now run
    # at 1.23 / 0.90 of the datasheet share, the rest of the step at its 936 GB/s.
    w = Workload(model="bert-base", precision="fp16", micro_batch_size=96, seq_len=384, tokens=1e8,
                 gradient_checkpointing=False, flash_attention=False)
    e3090, ea10 = estimate(w, "RTX3090"), estimate(w, "A10")
    with cal.overridden(GEFORCE_GEMM_ATTAINABLE=cal.GEMM_ATTAINABLE["ampere"].value):
        from optimizer.estimator.estimate import clear_cache

        clear_cache()
        before = estimate(w, "RTX3090").tokens_per_second
    clear_cache()
    assert e3090.tokens_per_second > 1.05 * before
    assert e3090.tokens_per_second > ea10.tokens_per_second  # measured: 66,048 vs 51,840 tokens/s


def test_geforce_rows_left_out_are_closer(bench: ModuleType, cases: list) -> None:
    """Left-out error of every GeForce row: median about 28% (all too slow) with the generation's share;
    with the GeForce share the median is at most 22% and RTX 3090 BERT (M121) within 15%. Lambda's
    RTX 3090 ResNet-50 rows (V029, V030) were added by rule, not fitted on: they still come out
    too slow (-25% TF32, -15% AMP), as does the RTX 4090 (L2 / memory side not priced)."""
    _, t_rows, _ = bench.loso_rows(cases)
    err = {c.id: e for c, e in t_rows if c.id in GEFORCE_ROWS}
    assert set(err) == set(GEFORCE_ROWS)
    assert statistics.median(abs(e) for e in err.values()) <= 22.0, err
    assert abs(err["M121"]) <= 15.0, err
    assert all(e < 0 for e in err.values()), err  # what is left is still too slow, not overshoot


def test_original_rows_hold_without_the_lambda_resnet_rows(bench: ModuleType, cases: list) -> None:
    """The second pass's caveat: on the 104 speed rows scored before Lambda's ResNet-50 runs were
    added, the NCHW-transpose model gave p90 33.8% (one family's RTX 3090 rows set the image
    constants whenever NVIDIA's family was left out, and that card was priced too slow). With the
    GeForce share the same rows hold the issue's targets (measured: 9.0% / 24.7% / 90%)."""
    assert bench.row_ids("V015-V017,M013") == {"V015", "V016", "V017", "M013"}
    original = [c for c in cases if c.id not in bench.row_ids("V015-V034")]
    res = bench.family_summary(original)
    assert res["tput_rows"] == 104
    assert res["tput_median"] <= 12.0 and res["tput_p90"] <= 30.0 and res["tput_cover"] >= 0.75, res
