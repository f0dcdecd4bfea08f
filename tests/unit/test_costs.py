from __future__ import annotations

import math

import pytest

from optimizer import costs


@pytest.mark.parametrize(
    ("run_hours", "increment_s", "min_s", "expected_hours"),
    [
        (1.0, 3600, 0, 1.0),  # exact multiple: no extra hour
        (1.01, 3600, 0, 2.0),  # hourly billing rounds up
        (1.01, 60, 0, 61 / 60),  # per-minute billing
        (0.001, 1, 60, 60 / 3600),  # per-second billing with a one-minute minimum
        (0.5, 1, 3600, 1.0),  # minimum charge dominates
    ],
)
def test_billed_hours(run_hours: float, increment_s: int, min_s: int, expected_hours: float) -> None:
    assert costs.billed_hours(run_hours, increment_s, min_s) == pytest.approx(expected_hours)


def test_billed_hours_never_below_use() -> None:
    for h in (0.01, 0.3, 1.7, 12.25, 100.0):
        for inc in (1, 60, 3600):
            assert costs.billed_hours(h, inc) >= h - 1e-12


def test_spot_wall_hours_geometric() -> None:
    # 0.1 reclaims/h, each losing 0.1 h restart + 0.25 h of work (half of a 0.5 h interval).
    got = costs.spot_wall_hours(10.0, 0.1, 0.5, 0.1)
    assert got == pytest.approx(10.0 / (1 - 0.1 * 0.35))
    assert costs.spot_wall_hours(10.0, 0.0) == 10.0
    assert math.isinf(costs.spot_wall_hours(10.0, 10.0, 0.5, 0.1))


def test_rent_cost_parts_add_up_and_scale_with_nodes() -> None:
    one = costs.rent_cost(2.0, 3.0, 1, billing_increment_s=3600, setup_hours=0.1)
    two = costs.rent_cost(2.0, 3.0, 2, billing_increment_s=3600, setup_hours=0.1)
    assert one.billed_hours == 4.0  # 3.1 h billed hourly
    assert one.cost_per_run_usd == pytest.approx(8.0)
    assert two.cost_per_run_usd == pytest.approx(16.0)
    assert one.compute_usd + one.setup_usd + one.interruption_usd == pytest.approx(one.cost_per_run_usd)


def test_spot_run_is_longer_than_on_demand() -> None:
    od = costs.rent_cost(1.0, 10.0, spot=False)
    sp = costs.rent_cost(1.0, 10.0, spot=True, interruptions_per_hour=0.1)
    assert sp.wall_hours > od.wall_hours
    assert sp.interruption_usd > 0 and od.interruption_usd == 0


def test_resale_value_is_the_one_curve_breakeven_uses() -> None:
    # Issue 19: quote, plan and break-even value a machine on one curve (exponential decay from
    # the resellable share of the price to resale_fraction at the end of the life).
    assert costs.resale_value_usd(1000, 0.4, 0, 36) == 1000
    assert costs.resale_value_usd(1000, 0.4, 18, 36) == pytest.approx(1000 * 0.4**0.5)
    assert costs.resale_value_usd(1000, 0.4, 36, 36) == pytest.approx(400)
    assert costs.resale_value_usd(1000, 0.4, 36, 36, resellable_share=0.6) == pytest.approx(400)
    assert costs.resale_value_usd(1000, 0.4, 0, 36, resellable_share=0.6) == pytest.approx(600)
    for age in (0, 7, 18, 36, 90):
        assert costs.resale_value_usd(1000, 0.4, age, 36, 0.7) == costs.resale_curve_usd(1000, 0.4, age, 36, 0.7)


def test_energy_counts_psu_losses() -> None:
    assert costs.energy_kwh(1.0, 900, 0.9) == pytest.approx(1.0)
    assert costs.energy_cost_usd(10.0, 450, 0.2, 0.9) == pytest.approx(1.0)


def test_buy_cost() -> None:
    bc = costs.buy_cost(
        2000, 2, 5.0, 10, load_power_w=450, usd_per_kwh=0.2, resale_fraction=0.5, lifetime_months=24,
        psu_efficiency=0.9,
    )
    assert bc.capex_usd == 4000
    assert bc.resale_usd == pytest.approx(2000)
    assert bc.energy_per_run_usd == pytest.approx(2 * 5.0 * 0.5 * 0.2)
    assert bc.total_usd == pytest.approx(4000 - 2000 + 10 * 1.0)
    held = costs.buy_cost(2000, 1, 5.0, 1, load_power_w=450, usd_per_kwh=0.2, resale_fraction=0.5,
                          lifetime_months=24, held_months=12)
    # Half-way through the life on the one resale curve: 2000 x 0.5 ** 0.5.
    assert held.resale_usd == pytest.approx(2000 * 0.5**0.5)


def test_machines_cover_the_hours_at_the_stated_utilization() -> None:
    # 993 machine-hours a month on machines that run at most 80 % of 730 h (584 h): two machines.
    two = costs.machines_needed(993, 1.0, 0.8)
    assert two.machines == 2 and two.utilization == pytest.approx(993 / 1460)
    assert costs.machines_needed(584, 1.0, 0.8).machines == 1
    assert costs.machines_needed(584.1, 1.0, 0.8).machines == 2
    # 2,000 runs of 16.5 h over a 36-month life: 33,000 h against 21,024 h per machine.
    life = costs.machines_needed(2000 * 16.5, 36, 0.8)
    assert life.machines == 2 and life.machines * 730 * 0.8 * 36 >= 33_000
    # Runs spread over two machines each take whole pairs.
    pairs = costs.machines_needed(1500, 1.0, 0.8, units_per_run=2)
    assert pairs.machines == 4


def test_resale_curve_starts_at_the_gpus_and_ends_at_the_fraction() -> None:
    assert costs.resale_curve_usd(2000, 0.3, 0, 36, 0.6) == pytest.approx(1200)
    assert costs.resale_curve_usd(2000, 0.3, 36, 36, 0.6) == pytest.approx(600)
    mid = costs.resale_curve_usd(2000, 0.3, 18, 36, 0.6)
    assert mid == pytest.approx(2000 * (0.6 * 0.3) ** 0.5)  # geometric mean: exponential decay
    assert costs.resale_curve_usd(2000, 0.3, 48, 36, 0.6) < 600


def test_outlay_is_cash_not_net_of_resale() -> None:
    bc = costs.buy_cost(3000, 1, 10, 4, load_power_w=500, usd_per_kwh=0.2, resale_fraction=0.4, lifetime_months=36,
                        machines=2)
    assert bc.capex_usd == 6000 and bc.resale_usd == pytest.approx(2400)
    assert bc.outlay_usd == pytest.approx(6000 + bc.energy_usd)
    assert bc.total_usd == pytest.approx(bc.outlay_usd - 2400)
    # Energy is per run on the machines that run it, whatever the number owned.
    assert bc.energy_per_run_usd == pytest.approx(10 * 0.5 / 0.9 * 0.2)
