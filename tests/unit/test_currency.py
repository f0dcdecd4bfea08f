from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from optimizer.errors import InvalidInput
from pricing.currency import fx_rate, to_usd


def test_cny_uses_the_newest_dated_rate() -> None:
    rate = fx_rate("cny")
    assert rate.currency == "CNY"
    assert rate.as_of == date(2026, 1, 8)
    assert rate.rate_to_usd == pytest.approx(1 / 7.0197)
    assert rate.source


def test_rate_on_a_date_picks_the_one_then_in_force() -> None:
    assert fx_rate("CNY", on=date(2023, 7, 1)).rate_to_usd == pytest.approx(1 / 7.1201)
    # Older than the table: its earliest rate, whose date the note names.
    early = fx_rate("CNY", on=date(2021, 6, 15))
    assert early.as_of == date(2023, 6, 19) and "rate of 2023-06-19" in early.note()


def test_to_usd_converts_and_usd_is_identity() -> None:
    assert to_usd(7.0197, "CNY") == pytest.approx(1.0)
    assert to_usd(3.5, "USD") == 3.5


def test_unknown_currency_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as err:
        to_usd(1.0, "XYZ")
    assert err.value.field == "currency"


def test_a_rates_file_adds_rates_and_replaces_same_day_ones(tmp_path: Path) -> None:
    f = tmp_path / "rates.csv"
    f.write_text(
        "currency,rate_to_usd,as_of,source\n"
        "EUR,1.1,2026-11-01,test table\n"
        "CNY,0.15,2026-01-08,corrected test rate\n",
        encoding="utf-8",
    )
    assert to_usd(10, "EUR", str(f)) == pytest.approx(11.0)
    # Same currency and date as a bundled rate: the file's rate wins.
    assert fx_rate("CNY", str(f), on=date(2026, 2, 1)).rate_to_usd == 0.15
    # Older bundled rates stay and still date older prices.
    assert fx_rate("CNY", str(f), on=date(2023, 7, 1)).rate_to_usd == pytest.approx(1 / 7.1201)


def test_each_price_converts_at_the_rate_of_its_own_date() -> None:
    from datetime import UTC, datetime

    from optimizer.offer import Offer
    from pricing.currency import convert_offers, rate_note, rate_table

    def cny(day: datetime) -> Offer:
        return Offer(provider="alibaba", region="cn-shanghai", instance_type="ecs.gn7i", gpu="A10",
                     gpu_count=1, gpu_vram_gb=24, price_hour=1.0, currency="CNY",
                     price_hour_native=10.0, source="list price", as_of=day)

    old, new = convert_offers([cny(datetime(2023, 6, 17, tzinfo=UTC)), cny(datetime(2026, 2, 1, tzinfo=UTC))],
                              rate_table())
    # 2023-06-17 predates the table's first CNY rate by two days: that nearest rate is used.
    assert old.price_hour == pytest.approx(10 / 7.1201, abs=1e-6)
    assert new.price_hour == pytest.approx(10 / 7.0197, abs=1e-6)
    assert "rate of 2023-06-19" in rate_note(old) and "rate of 2026-01-08" in rate_note(new)
    # Converting twice names the rate once.
    (again,) = convert_offers([old], rate_table())
    assert again.source.count("rate of") == 1


@pytest.mark.parametrize(
    "line, why",
    [("EUR,-1,2026-11-01,x", "> 0"), ("EURO,1.1,2026-11-01,x", "3-letter"),
     ("EUR,1.1,2026-13-01,x", "line 2"), ("EUR,1.1,2026-11-01,", "source")],
)
def test_rates_files_are_validated(tmp_path: Path, line: str, why: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(f"currency,rate_to_usd,as_of,source\n{line}\n", encoding="utf-8")
    with pytest.raises(InvalidInput) as err:
        fx_rate("EUR", str(f))
    assert err.value.field == "fx_file" and why in str(err.value) and str(f) in str(err.value)


def test_a_bad_rates_file_is_invalid_input(tmp_path: Path) -> None:
    f = tmp_path / "bad.csv"
    f.write_text("currency,rate_to_usd,as_of,source\nEUR,-1,2026-11-01,x\n", encoding="utf-8")
    with pytest.raises(InvalidInput):
        fx_rate("EUR", str(f))
    with pytest.raises(InvalidInput):
        fx_rate("EUR", str(tmp_path / "missing.csv"))
