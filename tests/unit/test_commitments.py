"""Pure commitment arithmetic: effective rates, break-even utilisation, what a plan is charged."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from optimizer.commitments import (
    breakeven_utilization,
    cheapest_term_commitment,
    commitment_options,
    effective_hourly_usd,
    term_cost_usd,
)
from optimizer.offer import Commitment, Offer
from optimizer.plan_commitments import CommitItem, charged_months, cheapest_per_length, monthly_charges

AS_OF = datetime(2025, 11, 30, tzinfo=UTC)


def _c(kind: str, months: float, payment: str, eff: float, klass: str | None = "standard") -> Commitment:
    return Commitment(kind=kind, term_months=months, payment=payment, effective_hourly_usd=eff,  # type: ignore[arg-type]
                      offering_class=klass, source="test", as_of=AS_OF)


def _offer(price: float | None, commitments: list[Commitment]) -> Offer:
    return Offer(provider="aws", region="us-east-1", instance_type="p4d.24xlarge", gpu="A100", gpu_count=8,
                 gpu_vram_gb=40, price_hour=price, source="test", as_of=AS_OF, commitments=commitments)


def test_effective_rate_of_the_real_g6_all_upfront_term() -> None:
    # AWS get_products, g6.xlarge us-east-1, 3yr standard All Upfront: 8,449 USD up front, 0.00/h;
    # the reference table's effective rate is 0.321499 (= 8449 / 26280 h).
    assert effective_hourly_usd(8449, 0.0, 36) == pytest.approx(0.321499, abs=1e-6)
    # 1yr standard Partial Upfront: 2,186 up front + 0.24949/h -> 0.499033 in the same table.
    assert effective_hourly_usd(2186, 0.24949, 12) == pytest.approx(0.499033, abs=1e-6)
    with pytest.raises(ValueError):
        effective_hourly_usd(1, 1, 0)


def test_breakeven_utilization_is_the_rate_ratio_and_none_when_never() -> None:
    # p4d.24xlarge us-east-1: 3yr standard All Upfront 8.159056 vs on demand 21.957642 (reference data).
    assert breakeven_utilization(8.159056, 21.957642) == pytest.approx(0.371582, abs=1e-6)
    assert breakeven_utilization(22.0, 21.957642) is None
    assert breakeven_utilization(1.0, 0.0) is None
    # At exactly that utilisation the two cost the same over the term.
    c = _c("reserved", 36, "all_upfront", 8.159056)
    u = breakeven_utilization(c.effective_hourly_usd, 21.957642)
    assert term_cost_usd(c) == pytest.approx(21.957642 * u * c.term_hours)  # type: ignore[operator]


def test_options_keep_terms_cheaper_than_on_demand_cheapest_first() -> None:
    terms = [_c("reserved", 12, "no_upfront", 13.921094), _c("reserved", 36, "all_upfront", 8.159056),
             _c("savings_plan", 12, "no_upfront", 25.0, "Compute"),
             _c("capacity_block", 24 / 730, "all_upfront", 14.75, None)]
    shown = commitment_options(_offer(21.957642, terms), nodes=2)
    assert [s.effective_hourly_usd for s in shown] == [8.159056, 13.921094, 14.75]  # 25.0 dropped
    assert shown[0].option_hourly_usd == pytest.approx(2 * 8.159056)
    assert shown[0].saving_vs_on_demand == pytest.approx(1 - 8.159056 / 21.957642, abs=1e-4)
    block = shown[-1]
    assert block.kind == "capacity_block" and block.breakeven_utilization is None
    assert commitment_options(_offer(None, terms)) == []
    assert cheapest_term_commitment(_offer(21.9, terms)).effective_hourly_usd == 8.159056  # type: ignore[union-attr]


def test_plan_offers_one_term_per_length_and_no_capacity_blocks() -> None:
    terms = [_c("reserved", 12, "no_upfront", 13.921094), _c("reserved", 12, "all_upfront", 12.993037),
             _c("reserved", 12, "all_upfront", 15.591667, "convertible"), _c("reserved", 36, "all_upfront", 8.159056),
             _c("capacity_block", 24 / 730, "all_upfront", 5.0, None)]
    picked = cheapest_per_length(_offer(21.957642, terms))
    assert [(c.term_months, c.effective_hourly_usd) for c in picked] == [(12, 12.993037), (36, 8.159056)]


def test_terms_past_the_horizon_are_charged_in_full_unless_they_keep_value() -> None:
    assert charged_months(36, 0, 12, value_after_horizon=False) == 36
    assert charged_months(36, 0, 12, value_after_horizon=True) == 12
    assert charged_months(12, 4, 12, value_after_horizon=True) == 8
    assert charged_months(12, 4, 12, value_after_horizon=False) == 12


def test_monthly_charges_add_up_to_the_commit_cost() -> None:
    items = [CommitItem(provider="aws", region="us-east-1", instance_type="p4d.24xlarge", kind="reserved",
                        term_months=36, payment="all_upfront", count=2, start_month=3,
                        effective_hourly_usd=8.159056, charged_months=36, cost_usd=round(8.159056 * 730 * 36 * 2, 2))]
    monthly = monthly_charges(items, 12)
    assert monthly[:3] == [0.0, 0.0, 0.0]
    assert monthly[4] == pytest.approx(8.159056 * 730 * 2)
    assert sum(monthly) == pytest.approx(items[0].cost_usd, abs=0.01)
