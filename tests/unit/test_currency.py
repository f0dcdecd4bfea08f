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
    with pytest.raises(InvalidInput):
        fx_rate("CNY", on=date(2000, 1, 1))


def test_to_usd_converts_and_usd_is_identity() -> None:
    assert to_usd(7.0197, "CNY") == pytest.approx(1.0)
    assert to_usd(3.5, "USD") == 3.5


def test_unknown_currency_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as err:
        to_usd(1.0, "XYZ")
    assert err.value.field == "currency"


def test_a_rates_file_overrides_the_bundled_table(tmp_path: Path) -> None:
    f = tmp_path / "rates.csv"
    f.write_text("currency,rate_to_usd,as_of,source\nEUR,1.1,2026-11-01,test table\n", encoding="utf-8")
    assert to_usd(10, "EUR", str(f)) == pytest.approx(11.0)
    with pytest.raises(InvalidInput):
        to_usd(1, "CNY", str(f))


def test_a_bad_rates_file_is_invalid_input(tmp_path: Path) -> None:
    f = tmp_path / "bad.csv"
    f.write_text("currency,rate_to_usd,as_of,source\nEUR,-1,2026-11-01,x\n", encoding="utf-8")
    with pytest.raises(InvalidInput):
        fx_rate("EUR", str(f))
    with pytest.raises(InvalidInput):
        fx_rate("EUR", str(tmp_path / "missing.csv"))
