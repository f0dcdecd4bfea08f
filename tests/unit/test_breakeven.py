from __future__ import annotations

import math

import pytest

from optimizer import costs
from optimizer.breakeven import BuyLike, RentLike, breakeven, breakeven_runs
from optimizer.errors import InvalidInput
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, build, offer, shardings

OFFERS = [offer("a100-1", "A100", 1, 3.0, increment_s=1), offer("a100-1-dear", "A100", 1, 4.0),
          offer("a10g", "A10G", 1, 1.0)]
BUILDS = [build("b4090", "RTX4090", 2500, resale=0.4, kwh=0.2), build("b4090-dear", "RTX4090", 3500),
          build("b3090", "RTX3090", 1500)]


def run(**kw: object):  # type: ignore[no-untyped-def]
    args = dict(rent=RentLike(gpu="A100"), buy=BuyLike(gpu="RTX4090"), runs_per_month=4, horizon_months=24)
    args.update(kw)
    return breakeven(WORKLOAD, args.pop("rent"), args.pop("buy"), OFFERS, BUILDS,  # type: ignore[arg-type]
                     estimator=FakeEstimator(), shardings=shardings, **args)  # type: ignore[arg-type]


def test_breakeven_runs_formula() -> None:  # the fixed-resale count, kept for callers
    assert breakeven_runs(1000, 11, 1) == 100
    assert breakeven_runs(1000, 11.5, 1) == 96  # ceil(95.2)
    assert breakeven_runs(1000, 1, 1) is None
    assert breakeven_runs(1000, 0.5, 1) is None
    assert breakeven_runs(0, 5, 1) == 0


def test_picks_cheapest_rental_and_cheapest_build_of_the_gpu() -> None:
    r = run()
    assert r.rent.instance_type == "a100-1" and r.buy.build == "b4090"
    # Independent arithmetic: 4 h of A100 plus the estimate's 0.1 h setup, billed once, at $3/h;
    # 6 h + 0.1 h setup at 500 W / 0.9 at $0.2.
    storage = r.rent.option.cost_breakdown.get("storage_usd", 0.0)
    assert r.rent.cost_per_run_usd - storage == pytest.approx(3.0 * 4.1, abs=1e-3)
    # Plus an hour at the build's 60 W idle power between runs (issue 19: costs.IDLE_HOURS_PER_RUN).
    assert r.buy.energy_per_run_usd == pytest.approx((6.1 * 0.5 + 1.0 * 0.06) / 0.9 * 0.2, abs=1e-3)
    assert r.buy.machines == 1 and r.buy.capex_usd == 2500 and r.buy.resale_usd == pytest.approx(1000)


def _d(r, month: float) -> float:  # type: ignore[no-untyped-def]
    """Renting minus owning through ``month``, owning net of the catalog's resale curve then."""
    runs = r.runs_per_month * month
    resale = costs.resale_curve_usd(r.buy.price_per_machine_usd, 0.4, month, 36, 0.6) * r.buy.machines
    return runs * r.rent.cost_per_run_usd - (r.buy.capex_usd + runs * r.buy.energy_per_run_usd - resale)


def test_breakeven_month_is_where_owning_net_of_resale_stops_costing_more() -> None:
    r = run(runs_per_month=30)
    m = r.breakeven_months
    assert m is not None and m > 0
    assert _d(r, m + 0.01) >= 0 > _d(r, m - 0.01)
    # ``breakeven_months`` is rounded to 0.01: the runs done by then lie within that rounding.
    assert math.ceil((m - 0.005) * 30 - 1e-6) <= r.breakeven_runs <= math.ceil((m + 0.005) * 30)
    assert r.within_lifetime == (m <= 36)


@pytest.mark.parametrize("rpm", [2, 4, 30, 120])
def test_horizon_answer_agrees_with_breakeven(rpm: float) -> None:
    for horizon in (6, 12, 24, 36, 60):
        r = run(runs_per_month=rpm, horizon_months=horizon)
        buy_by_horizon = r.breakeven_months is not None and r.breakeven_months <= horizon
        assert (r.cheaper_at_horizon == "buy") == buy_by_horizon, (rpm, horizon, r.breakeven_months)


def test_machines_cover_the_hours_the_cadence_needs() -> None:
    # 6.1 h a run: 60 runs = 366 h a month, one machine; 200 runs = 1,220 h: three at 80 % of 730 h.
    one = run(runs_per_month=60)
    assert one.buy.machines == 1 and one.buy.utilization == pytest.approx(366 / 730, abs=1e-3)
    three = run(runs_per_month=200)
    assert three.buy.machines == 3 and three.buy.capex_usd == 3 * 2500
    assert three.buy.machine_hours_per_month == 3 * 730 >= three.buy.hours_per_month_needed
    assert three.buy.hours_per_month_needed == pytest.approx(200 * 6.1, abs=0.01)
    assert three.buy.hours_per_month_needed <= 3 * 730 * 0.8 < 2 * 730 * 0.8 + three.buy.hours_per_month_needed
    assert three.buy.option.machines == 3


def test_never_when_renting_costs_less_than_the_energy() -> None:
    cheap = [offer("a10g", "A10G", 1, 0.01)]
    r = breakeven(WORKLOAD, RentLike(gpu="A10G"), BuyLike(build="b4090"), cheap, BUILDS,
                  estimator=FakeEstimator(), shardings=shardings)
    assert r.breakeven_runs is None and r.breakeven_months is None and r.cheaper_at_horizon == "rent"
    assert r.payback_months_cash is None


def test_sensitivity_moves_the_right_way() -> None:
    r = run(runs_per_month=30)
    elec = [s for s in r.sensitivity if s.parameter == "electricity_usd_per_kwh"]
    months = [s.breakeven_months for s in elec]
    assert [s.value for s in elec] == sorted(s.value for s in elec)
    assert all(a is not None and b is not None and a <= b for a, b in zip(months, months[1:]))
    util = [s for s in r.sensitivity if s.parameter == "runs_per_month"]
    months = [s.breakeven_months for s in util]
    assert all(a is not None and b is not None and a >= b for a, b in zip(months, months[1:]))
    assert months[0] > months[-1]


def test_cumulative_series() -> None:
    r = run(horizon_months=12)
    assert len(r.cumulative) == 13
    first, last = r.cumulative[0], r.cumulative[-1]
    assert first.rent_usd == 0 and first.buy_usd == 2500
    # Only the GPUs (60 % of the price) resell: the day it is bought the machine is worth $1,500.
    assert first.buy_net_of_resale_usd == pytest.approx(1000, abs=0.01)
    assert last.rent_usd == pytest.approx(48 * r.rent.cost_per_run_usd, abs=0.05)
    resale_12 = costs.resale_curve_usd(2500, 0.4, 12, 36, 0.6)
    assert last.buy_net_of_resale_usd == pytest.approx(last.buy_usd - resale_12, abs=0.01)


def test_electricity_override() -> None:
    base = run()
    dear = run(electricity_usd_per_kwh=0.4)
    assert dear.buy.usd_per_kwh == 0.4
    assert dear.buy.energy_per_run_usd == pytest.approx(2 * base.buy.energy_per_run_usd, abs=1e-3)


def test_bad_targets_are_bad_input() -> None:
    with pytest.raises(InvalidInput) as exc:
        run(buy=BuyLike(build="no-such-build"))
    assert exc.value.field == "buy.build"
    with pytest.raises(InvalidInput) as exc:
        run(rent=RentLike(provider="aws", instance_type="nope.xlarge"))
    assert exc.value.field == "rent.instance_type"
    with pytest.raises(InvalidInput):
        run(rent=RentLike(gpu="T4"))  # T4 in no offer: nothing to rent


def test_charts_render() -> None:
    from service.render.charts import breakeven_chart

    r = run()
    png = breakeven_chart(r, "png")
    svg = breakeven_chart(r, "svg")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert b"<svg" in svg[:500]
    assert breakeven_chart(r, "svg") == svg  # deterministic output
    assert math.isfinite(r.buy.cost_per_run_at_cadence_usd or math.nan)


def test_named_build_short_of_host_ram_is_judged_on_its_gpu_with_a_note() -> None:
    small = [build("b4090-16gb", "RTX4090", 2500, ram_gb=8)]  # the fake wants 16 GB of host RAM
    r = breakeven(WORKLOAD, RentLike(gpu="A100"), BuyLike(build="b4090-16gb"), OFFERS, small,
                  estimator=FakeEstimator(), shardings=shardings)
    assert r.buy.build == "b4090-16gb"
    assert any("8 GB RAM" in n and "16 GB" in n for n in r.notes)
