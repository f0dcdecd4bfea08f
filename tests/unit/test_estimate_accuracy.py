"""The estimator against published measurements, and the estimate() contract.

Accuracy targets: on rows of kind ``measurement`` (``vram_kind`` ``peak`` for VRAM), median
absolute error <= 15% for peak VRAM and <= 25% for throughput, VRAM error at most half the
"weights + gradients + Adam states" baseline's; the same after refitting the fitted constants
without each source in turn (leave-one-source-out).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from pydantic import ValidationError

from optimizer.errors import InvalidInput, UnknownGpu, UnknownModel
from optimizer.estimator import calibration as cal
from optimizer.estimator.estimate import clear_cache, estimate, resolve_sharding, usable_vram_gb
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.workload import Workload
from tests.unit.accuracy_bench import estimator_accuracy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return estimator_accuracy()


DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def cases(bench: ModuleType) -> list:
    # Copies of the public reference rows (tests/data/reference/README.md), the rows added from
    # public sources and the restatements of what each source's stack ran.
    files = (DATA / "reference" / "measurement_cases.jsonl", DATA / "measurements_extra.jsonl")
    rows = bench.load_cases(files, DATA / "measurements_adjustments.jsonl")
    assert len(rows) >= 80
    return rows


def _errors(bench: ModuleType, cases: list) -> tuple[list[float], list[float], list[float]]:
    from optimizer.estimator.memory import baseline_states_gb
    from optimizer.estimator.shapes import resolve_model

    v, vb, t = [], [], []
    for c in bench.vram_cases(cases):
        e = estimate(c.workload, c.gpu, c.gpu_count)
        v.append(bench.pct(e.memory_gb.total_per_gpu, c.vram_gb))
        vb.append(bench.pct(baseline_states_gb(resolve_model(c.workload.model), c.workload), c.vram_gb))
    for c in bench.tput_cases(cases):
        t.append(bench.pct(bench._predict_tps(c), bench.measured_rate(c)))
    return v, vb, t


def test_accuracy_targets(bench: ModuleType, cases: list) -> None:
    v, vb, t = _errors(bench, cases)
    assert len(v) >= 20 and len(t) >= 40
    v_med, _ = bench.summary(v)
    vb_med, _ = bench.summary(vb)
    t_med, _ = bench.summary(t)
    assert v_med <= 15.0, v_med
    assert v_med <= 0.5 * vb_med, (v_med, vb_med)
    assert t_med <= 25.0, t_med


def test_accuracy_holds_on_reference_rows_alone(bench: ModuleType, cases: list) -> None:
    reference = [c for c in cases if not c.id.startswith("X")]
    v, _, t = _errors(bench, reference)
    assert bench.summary(v)[0] <= 15.0
    assert bench.summary(t)[0] <= 25.0


def test_accuracy_holds_leaving_each_source_out(bench: ModuleType, cases: list) -> None:
    v_rows, t_rows, _ = bench.loso_rows(cases)
    v_err = [e for _, e in v_rows]
    t_err = [e for _, e in t_rows]
    assert bench.summary(v_err)[0] <= 12.0
    assert bench.summary(t_err)[0] <= 12.0
    # The p90 targets: 20% for memory (offload rows apart: DeepSpeed's parameter cache is only
    # roughly modelled) and 35% for throughput.
    assert bench.summary([e for c, e in v_rows if c.workload.offload == "none"])[1] <= 20.0
    assert bench.summary(t_err)[1] <= 35.0
    assert all(abs(e) <= 50.0 for c, e in v_rows if c.workload.offload != "none")
    images = [e for c, e in t_rows if c.is_vision]
    assert len(images) >= 8 and bench.summary(images)[0] <= 20.0


def test_throughput_error_near_memory_error(bench: ModuleType, cases: list) -> None:
    v, _, t = _errors(bench, cases)
    assert bench.summary(t)[0] <= 1.25 * bench.summary(v)[0]


def test_fit_boundaries_fit(cases: list) -> None:
    import json

    path = DATA / "reference" / "measurement_cases.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    bounds = [r for r in rows if r["kind"] == "measurement" and r["vram_kind"] == "fit_boundary"]
    assert bounds
    for r in bounds:
        req = r["request"]
        est = estimate(Workload.model_validate(req["workload"]), req["gpu"], req["gpu_count"])
        # The largest setting that ran on that card must be predicted to fit it.
        assert est.fits, (r["id"], est.memory_gb.total_per_gpu)


# --- estimate() contract -------------------------------------------------------------------


def test_contract_shape() -> None:
    w = Workload(model="llama-3-8b", method="qlora", micro_batch_size=4, seq_len=2048,
                 gradient_checkpointing=True, tokens=1e8)
    est = estimate(w, "A100-80GB", 1)
    body = est.model_dump()
    assert body["params"] == 8_030_261_248
    assert {"weights", "gradients", "optimizer", "activations", "overhead", "total_per_gpu", "allocator_peak",
            "nvidia_smi"} == set(body["memory_gb"])
    assert body["memory_gb"]["allocator_peak"] + body["memory_gb"]["overhead"] == pytest.approx(
        body["memory_gb"]["total_per_gpu"], abs=0.01)
    parts = est.memory_gb
    assert parts.total_per_gpu == pytest.approx(
        parts.weights + parts.gradients + parts.optimizer + parts.activations + parts.overhead, abs=0.01
    )
    assert est.gpu_vram_gb == 80.0 and est.fits and est.sharding == "ddp"
    assert est.train_flops > 0 and est.tokens_per_second > 0 and 0 < est.mfu < 1 and est.hours > 0
    assert est.host.ram_gb >= 32 and est.host.cpu_cores >= 1 and est.host.disk_gb > 0


def test_auto_sharding_picks_lightest_that_fits() -> None:
    assert resolve_sharding("auto", 1) == ["ddp"]
    assert resolve_sharding("auto", 4) == ["ddp", "zero2", "zero3"]
    assert resolve_sharding("zero3", 4) == ["zero3"]
    small = Workload(model="qwen2.5-0.5b", method="full", micro_batch_size=1, seq_len=512)
    assert estimate(small, "A100-80GB", 4).sharding == "ddp"
    big = Workload(model="llama-2-7b", method="full", micro_batch_size=1, seq_len=512, gradient_checkpointing=True)
    picked = estimate(big, "A100-80GB", 8)
    assert picked.sharding == "zero2" and picked.fits
    assert estimate(big, "A100-80GB", 8, "ddp").fits is False
    assert estimate(big, "A100-80GB", 1).sharding == "ddp"


def test_more_ddp_gpus_do_not_fix_vram() -> None:
    w = Workload(model="llama-2-7b", method="full", micro_batch_size=1, seq_len=512)
    one = estimate(w, "RTX4090", 1, "ddp")
    four = estimate(w, "RTX4090", 4, "ddp")
    assert four.memory_gb.total_per_gpu == pytest.approx(one.memory_gb.total_per_gpu, rel=0.01)
    assert not four.fits and any("DDP" in n for n in four.notes)


def test_fits_against_nominal_size_with_binary_headroom() -> None:
    assert usable_vram_gb(gpu_spec("RTX4090")) == 24.0
    est = estimate(Workload(model="gpt2"), "RTX4090")
    assert est.all_details["physical_vram_gb"] == pytest.approx(25.77, abs=0.01)
    assert est.fits == (est.memory_gb.total_per_gpu <= est.gpu_vram_gb)


def test_bad_input() -> None:
    with pytest.raises(UnknownGpu):
        estimate(Workload(model="gpt2"), "RTX9999")
    with pytest.raises(UnknownModel):
        estimate(Workload(model="gtp2"), "A100")
    with pytest.raises(InvalidInput):
        estimate(Workload(model="gpt2"), "A100", 0)


def test_results_are_memoized_and_frozen() -> None:
    # From clean memos: a search an earlier test ran for another amount of this workload would
    # make the estimate at that amount, moved on every read, never the same object twice.
    clear_cache()
    w = Workload(model="gpt2", micro_batch_size=8, seq_len=256)
    first = estimate(w, "A10G")
    with pytest.raises(ValidationError):
        first.hours = 0.0  # shared through the cache, so callers cannot change it
    assert isinstance(first.notes, tuple)
    assert estimate(w, "A10G") is first
    assert first == estimate(Workload(model="gpt2", micro_batch_size=8, seq_len=256), "a10g")


def test_a_changed_copy_of_a_workload_is_estimated_afresh() -> None:
    w = Workload(model="gpt2", micro_batch_size=8, seq_len=256)
    base = estimate(w, "A10G")
    bigger = estimate(w.model_copy(update={"micro_batch_size": 32}), "A10G")
    assert bigger.memory_gb.activations > base.memory_gb.activations


def test_leave_one_source_family_out_targets(bench: ModuleType, cases: list) -> None:
    """Issue 18: every row of a paper / repo / blog left out together, constants refitted without them.
    VRAM: median <= 8%, p90 <= 18%; throughput: median <= 12%, p90 <= 30% (29.3% on 2026-12-01, the
    GPT-3 175B model-parallel rows included); ranges hold >= 75% of the left-out truths."""
    res = bench.family_summary(cases)
    assert len(res["families"]) >= 9
    assert res["vram_median"] <= 8.0 and res["vram_p90"] <= 18.0, res
    assert res["tput_median"] <= 12.0 and res["tput_p90"] <= 30.0, res
    assert res["vram_cover"] >= 0.75 and res["tput_cover"] >= 0.75, res
    # Papers and their authors' repositories are one family.
    assert bench.source_group("Touvron et al. 2023 LLaMA (arXiv 2302.13971)") == "github:meta-llama"
    assert bench.source_group("github:huggingface/peft README.md") == bench.source_group("github:huggingface/transformers x")


def test_tf32_rows_hold_with_either_family_left_out(bench: ModuleType, cases: list) -> None:
    """TF32 ResNet-50 truth now comes from two families (DeepLearningExamples' README, Lambda's
    benchmark logs V015-V027), all NCHW. With cuDNN's layout transposes priced
    (``NCHW_TRANSPOSES_PER_CONV``) the TF32 share refits to its prior, the TF32 tensor-core rate, with
    either family left out, and the left-out TF32 rows land within 20% (they were 32-37% too fast
    while a 0.5 share fitted on NVIDIA's rows stood in for the transposes)."""
    tf32_groups = {c.group for c in bench.tput_cases(cases) if c.is_vision and c.workload.precision == "tf32"}
    assert {"github:nvidia", "github:lambdal"} <= tf32_groups
    for group in ("github:nvidia", "github:lambdal"):
        values = bench.fit([c for c in cases if c.group != group])
        assert values["TF32_CONV_SHARE"] == 1.0, (group, values)
        held = [c for c in bench.tput_cases(cases) if c.group == group and c.workload.precision == "tf32"
                and c.gpu_count == 1 and c.gpu in ("A100-80GB", "H100")]
        assert held, group
        with cal.overridden(**values):
            errs = {c.id: bench.pct(bench._predict_tps(c), bench.measured_rate(c)) for c in held}
        assert all(abs(e) <= 20.0 for e in errs.values()), errs
    by_id = {c.id: c for c in cases}
    # One A100-80GB, batch 640, synthetic data, NCHW: 1067 img/s measured (log Summary line, V015).
    assert by_id["V015"].samples_per_second == pytest.approx(1066.99)
    assert by_id["V015"].workload.memory_format == "nchw" and by_id["V017"].gpu_count == 8
    assert by_id["V002"].workload.memory_format == "nchw"  # adjusted: DLE's TF32 config runs NCHW
    assert by_id["V001"].workload.memory_format == "channels_last"  # DLE's AMP config: nhwc
