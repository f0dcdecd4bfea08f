"""Measurements as data: the record's checks, and estimates that use what was measured
(``optimizer.measurement``, ``optimizer.measured``, ``service.probe.record``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optimizer.errors import InvalidInput
from optimizer.estimator.estimate import estimate
from optimizer.estimator.workload import Workload
from optimizer.measured import MeasurementIndex, cpu_estimate, measured_estimator, recipe_key
from optimizer.measurement import parse_measurement
from service.probe.record import cv, percentile, settled, step_stats

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"


def _published() -> dict[str, Any]:
    """RTX 4090, bert-base fp16 at micro-batch 96 x 384: 114,048 tokens/s (lambdal benchmark; see the file)."""
    return json.loads((DATA / "rtx4090_bert_base.json").read_text(encoding="utf-8"))


def _with(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**record, **changes}


def test_published_record_is_accepted_with_a_content_id() -> None:
    m = parse_measurement(_published())
    assert m.gpu == "RTX4090" and m.id is not None and m.id.startswith("m-")
    assert parse_measurement(_published()).id == m.id  # the same content, the same id
    assert m.tokens_per_step == 96 * 384


@pytest.mark.parametrize(
    ("changes", "field", "needle"),
    [
        # Step times in milliseconds: 323.2 "s" per step cannot give 114,048 tokens/s.
        ({"step_seconds": {"median": 323.2, "p10": 320.0, "p90": 330.0}}, "step_seconds.median", "milliseconds"),
        ({"step_seconds": {"median": -0.3, "p10": 0.3, "p90": 0.3}}, "step_seconds.median", "greater than 0"),
        ({"tokens_per_second": -5.0}, "tokens_per_second", "greater than 0"),
        ({"step_seconds": {"median": 0.3, "p10": 0.4, "p90": 0.2}}, "step_seconds", "p10 <= median <= p90"),
        ({"gpu": "RTX 4099"}, "gpu", "unknown GPU"),
        # Memory in MiB, not GB (bytes are beyond the field's bound and named the same way).
        ({"peak_vram_gb": 21_458.0}, "peak_vram_gb", "GB (10^9 bytes)"),
        ({"allocated_peak_gb": 22_500_000_000.0}, "allocated_peak_gb", "less than or equal"),
        ({"mfu": 45.0}, "mfu", "less than or equal to 1"),
        # bert-base has ~110M parameters; a record of a 7B model's run is another model's.
        ({"model_params": 7_000_000_000}, "model_params", "different model"),
        ({"tokens_per_second": 50_000.0}, "tokens_per_second", "does not match"),
        ({"measured_at": "2023-10-01T00:00:00"}, "measured_at", "timezone"),
        ({"unit": "ms"}, "unit", "Extra inputs"),
    ],
)
def test_bad_records_name_the_field(changes: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_measurement(_with(_published(), **changes))
    assert info.value.field == field
    assert needle in info.value.reason


def test_a_measurement_is_of_one_recipe() -> None:
    record = _published()
    record["workload"] = {**record["workload"], "micro_batch_size": "auto"}
    with pytest.raises(InvalidInput) as info:
        parse_measurement(record)
    assert info.value.field == "workload.micro_batch_size"


def test_oom_record_needs_no_speed() -> None:
    record = _with(_published(), fits=False, step_seconds=None, tokens_per_second=None, samples_per_second=None)
    assert parse_measurement(record).fits is False


def _workload() -> Workload:
    return Workload.model_validate(_published()["workload"])


def test_on_the_measured_gpu_the_measurement_replaces_the_model() -> None:
    m = parse_measurement(_published())
    w = _workload()
    model = estimate(w, "RTX4090")
    est = measured_estimator(estimate, [m])(w, "RTX4090")
    assert (model.basis, model.measurement_id) == ("model", None)
    assert (est.basis, est.measurement_id) == ("measured", m.id)
    assert est.tokens_per_second == 114048.0 != model.tokens_per_second
    # Hours: 1e8 tokens at the measured rate, plus the model's fixed per-run hours (set-up, ...).
    fixed = model.hours - model.details["hours_parts"]["train_hours"]
    assert est.hours == pytest.approx(1e8 / 114048.0 / 3600 + fixed, abs=1e-4)
    assert est.details["model_figures"]["tokens_per_second"] == model.tokens_per_second


def test_on_other_gpus_the_model_ratio_scales_the_measurement() -> None:
    m = parse_measurement(_published())
    w = _workload()
    fn = measured_estimator(estimate, [m])
    model_4090, model_a100 = estimate(w, "RTX4090"), estimate(w, "A100-80GB")
    est = fn(w, "A100-80GB")
    assert (est.basis, est.measurement_id) == ("scaled", m.id)
    ratio = model_a100.tokens_per_second / model_4090.tokens_per_second
    assert est.tokens_per_second == pytest.approx(114048.0 * ratio, rel=1e-4)
    lo, hi = est.range["tokens_per_second"]
    assert lo < est.tokens_per_second < hi
    # Narrower than the model's own range: what the probe removed.
    mlo, mhi = model_a100.range["tokens_per_second"]
    assert hi - lo < mhi - mlo


def test_another_recipe_keeps_the_model() -> None:
    m = parse_measurement(_published())
    other = _workload().model_copy(update={"micro_batch_size": 48})
    est = measured_estimator(estimate, [m])(other, "RTX4090")
    assert est.basis == "model" and est == estimate(other, "RTX4090")


def test_measured_oom_rejects_the_recipe_on_that_gpu_only() -> None:
    oom = parse_measurement(_with(_published(), fits=False, step_seconds=None, tokens_per_second=None,
                                  samples_per_second=None))
    w = _workload()
    fn = measured_estimator(estimate, [oom])
    est = fn(w, "RTX4090")
    assert est.fits is False and est.basis == "measured"
    assert any("does not fit at micro-batch 96" in x for x in est.warnings)
    assert fn(w, "A100-80GB").basis == "model"


def test_newest_measurement_wins() -> None:
    old = parse_measurement(_published())
    new = parse_measurement(_with(_published(), measured_at="2025-01-01T00:00:00Z",
                                  step_seconds={"median": 0.30, "p10": 0.29, "p90": 0.31},
                                  tokens_per_second=122_880.0))
    index = MeasurementIndex([old, new])
    (found, *_rest) = index.get(recipe_key(_workload(), 96, False))
    assert found.id == new.id
    assert measured_estimator(estimate, [old, new])(_workload(), "RTX4090").tokens_per_second == 122_880.0


def test_no_measurements_is_the_model_itself() -> None:
    assert measured_estimator(estimate, []) is estimate


def test_cpu_estimate_only_from_a_cpu_measurement() -> None:
    with pytest.raises(InvalidInput) as info:
        cpu_estimate(_workload(), [parse_measurement(_published())], estimate)
    assert info.value.field == "gpu" and "gpucost probe --device cpu" in info.value.reason
    cpu = parse_measurement(_with(_published(), gpu="cpu", device_name="cpu",
                                  step_seconds={"median": 36.864, "p10": 36.0, "p90": 38.0},
                                  tokens_per_second=1000.0))
    est = cpu_estimate(_workload(), [cpu], estimate)
    assert (est.gpu, est.basis, est.measurement_id, est.tokens_per_second) == ("cpu", "measured", cpu.id, 1000.0)


def test_step_statistics() -> None:
    assert cv([1.0, 1.0, 1.0]) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.1) == pytest.approx(1.4)
    s = step_stats([0.5, 0.1, 0.3, 0.2, 0.4])
    assert (s.median, s.p10, s.p90) == (0.3, pytest.approx(0.14), pytest.approx(0.46))
    # Warm-up: at least 2 (and the window of 3) steps, then the last 3 within 5 % CV.
    assert not settled([1.0, 1.0])
    assert settled([5.0, 1.0, 1.01, 0.99])
    assert not settled([5.0, 1.0, 1.5, 0.7])
