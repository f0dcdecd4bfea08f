"""Currency conversion through a dated rates table.

Offers keep their source currency; USD figures are the native figure times ``rate_to_usd`` of the
newest rate in the table (``fx_rates.csv`` shipped with the snapshot, or a file the user names).
Each rate carries its date and source so a quote can say which rate it used.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import resources
from pathlib import Path

from optimizer.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class FxRate:
    currency: str
    rate_to_usd: float  # USD per one unit of ``currency``
    as_of: date
    source: str

    def to_usd(self, amount: float) -> float:
        return amount * self.rate_to_usd


def _read_rates(text: str, origin: str) -> dict[str, list[FxRate]]:
    table: dict[str, list[FxRate]] = {}
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            rate = FxRate(
                currency=row["currency"].strip().upper(),
                rate_to_usd=float(row["rate_to_usd"]),
                as_of=date.fromisoformat(row["as_of"].strip()),
                source=row["source"].strip(),
            )
        except (KeyError, ValueError, AttributeError) as exc:
            raise InvalidInput("rates_file", f"{origin} line {line}: {exc}") from exc
        if rate.rate_to_usd <= 0:
            raise InvalidInput("rates_file", f"{origin} line {line}: rate must be > 0")
        table.setdefault(rate.currency, []).append(rate)
    for rates in table.values():
        rates.sort(key=lambda r: r.as_of)
    return table


@lru_cache(maxsize=8)
def _rates(rates_file: str | None) -> dict[str, list[FxRate]]:
    if rates_file is None:
        text = resources.files("pricing.snapshot").joinpath("data/fx_rates.csv").read_text("utf-8")
        return _read_rates(text, "fx_rates.csv")
    path = Path(rates_file)
    if not path.is_file():
        raise InvalidInput("rates_file", f"no such file: {rates_file}")
    return _read_rates(path.read_text(encoding="utf-8"), str(path))


def fx_rate(currency: str, rates_file: str | None = None, on: date | None = None) -> FxRate:
    """The newest rate for ``currency`` (the newest on or before ``on`` when given)."""
    code = currency.strip().upper()
    rates = _rates(rates_file).get(code)
    if not rates:
        known = ", ".join(sorted(_rates(rates_file)))
        raise InvalidInput("currency", f"no exchange rate for {currency!r} (known: {known})")
    if on is None:
        return rates[-1]
    earlier = [r for r in rates if r.as_of <= on]
    if not earlier:
        raise InvalidInput("currency", f"no {code} rate on or before {on.isoformat()}")
    return earlier[-1]


def to_usd(amount: float, currency: str, rates_file: str | None = None) -> float:
    return fx_rate(currency, rates_file).to_usd(amount)
