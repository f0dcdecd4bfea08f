"""Matching bill lines to runs (tag, else resource id and window), provisional lines inside the
billing lag, causes, and the shrunk calibration factors (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from optimizer.bill_calibration import learn
from optimizer.reconcile import reconcile
from optimizer.results import Option
from optimizer.runs import BillLine, PlannedRun

T0 = datetime(2026, 11, 10, 8, tzinfo=UTC)
NOW = T0 + timedelta(days=10)


def option(gpu: str = "A10G", hourly: float = 2.0, hours: float = 10.0, provider: str = "aws") -> Option:
    return Option(kind="cloud", provider=provider, region="us-east-1", instance_type="g5.xlarge", gpu=gpu,
                  gpus_per_node=1, nodes=1, pricing="on_demand", hourly_usd=hourly, hours=hours,
                  cost_usd=hourly * hours, memory_need_gb_per_gpu=10, vram_gb_per_gpu=24, sharding="ddp")


def run(rid: str, **kw: object) -> PlannedRun:
    opt = kw.pop("option", option())
    return PlannedRun(run_id=rid, team="t", option=opt, quoted_usd=opt.cost_usd, quoted_hours=opt.hours,  # type: ignore[union-attr]
                      created_at=T0 - timedelta(hours=1), **kw)  # type: ignore[arg-type]


def line(row: int, usd: str, *, hours: float = 0.0, tag: str | None = None, resource: str | None = None,
         start: datetime = T0, category: str = "compute") -> BillLine:
    return BillLine(row=row, billed_usd=Decimal(usd), effective_usd=Decimal(usd), start=start,
                    end=start + timedelta(hours=max(1.0, hours)), provider="aws", category=category,  # type: ignore[arg-type]
                    hours=hours, resource_id=resource, tags={"gpucost-run-id": tag} if tag else {})


def test_tag_first_then_resource_id_inside_the_window() -> None:
    runs = [run("a"), run("b", resource_ids=["i-b"], window_end=T0 + timedelta(days=1))]
    lines = [
        line(2, "24", hours=12, tag="a"),
        line(3, "20", hours=10, resource="i-b"),  # untagged, its resource in b's window
        line(4, "7.5", hours=3, resource="i-b", start=T0 + timedelta(days=2)),  # after b's window
        line(5, "1.25", tag="unknown-run"),  # a tag no run has: unmatched, not dropped
    ]
    r = reconcile(lines, runs, now=NOW)
    by = {b.run_id: b for b in r.runs}
    assert by["a"].matched_by == ["tag"] and by["b"].matched_by == ["resource"]
    assert by["a"].billed_hours == 12 and by["a"].cause == "ran longer"
    assert by["a"].differences.hours_usd == pytest.approx(4.0)  # 2 h more at $2
    assert by["b"].cause == "as quoted"
    assert r.unmatched_usd == 8.75 and r.unmatched_lines == 2 and r.billed_total_usd == 52.75


def test_lines_inside_the_billing_lag_are_provisional_and_teach_nothing() -> None:
    late_start = NOW - timedelta(hours=6)
    r = reconcile([line(2, "24", hours=12, tag="a"), line(3, "30", hours=15, tag="b", start=late_start)],
                  [run("a"), run("b")], now=NOW)
    assert r.provisional_usd == 30.0
    by = {b.run_id: b for b in r.runs}
    assert by["b"].provisional and not by["a"].provisional
    (factor,) = learn(r.runs)
    assert factor.runs == ["a"]


def test_dearer_rate_and_storage_left_running() -> None:
    r = reconcile([line(2, "30", hours=10, tag="a"), line(3, "0.5", tag="b", category="storage"),
                   line(4, "20", hours=10, tag="b"), line(5, "9", tag="b", category="storage")],
                  [run("a"), run("b")], now=NOW)
    by = {b.run_id: b for b in r.runs}
    assert by["a"].cause == "dearer rate" and by["a"].differences.rate_usd == pytest.approx(10.0)
    assert by["a"].billed_rate_usd == pytest.approx(3.0)
    assert by["b"].cause == "storage left running" and by["b"].differences.storage_usd == pytest.approx(9.5)


@pytest.mark.parametrize(("ratios", "want"), [
    ([1.2], 1.0667),             # 1 + 1/3 x 0.2
    ([1.2] * 3, 1.12),           # 1 + 3/5 x 0.2
    ([1.2] * 20, 1.1818),        # 1 + 20/22 x 0.2
    ([8.0], 2.0),                # one run 8x as long is clipped to 4: 1 + 1/3 x 3
])
def test_hours_factor_is_the_mean_ratio_shrunk_toward_one(ratios: list[float], want: float) -> None:
    runs = [run(f"r{i}") for i in range(len(ratios))]
    lines = [line(i + 2, str(2 * 10 * x), hours=10 * x, tag=f"r{i}") for i, x in enumerate(ratios)]
    (f,) = learn(reconcile(lines, runs, now=NOW).runs)
    assert f.hours_factor == pytest.approx(want, abs=1e-4)
    assert f.rate_factor == pytest.approx(1.0)


def test_factors_are_per_provider_and_gpu() -> None:
    runs = [run("a"), run("b", option=option(gpu="L4")), run("c", option=option(provider="gcp"))]
    lines = [line(2, "24", hours=12, tag="a"), line(3, "20", hours=10, tag="b"), line(4, "30", hours=10, tag="c")]
    got = {(f.provider, f.gpu): f for f in learn(reconcile(lines, runs, now=NOW).runs)}
    assert set(got) == {("aws", "A10G"), ("aws", "L4"), ("gcp", "A10G")}
    assert got[("aws", "L4")].hours_factor == 1.0 and got[("gcp", "A10G")].rate_factor == pytest.approx(1 + 1 / 3 * 0.5, abs=1e-4)
