"""Currency conversion through a dated rates table.

Offers keep their source currency; a native price converts to USD at the rate of its own date:
the newest rate on or before the price's ``as_of``, or, for a price older than the table, the
table's earliest rate (a 2021 price is better converted at the oldest known rate than refused; the
rate's date is named, so the gap is visible). Each rate carries its date and source, and a
converted offer names the rate it used in its ``source``.

The table is ``fx_rates.csv`` shipped with the snapshot; a user's file (``GPUCOST_FX_FILE``) adds
rates to it or replaces the bundled rate of the same currency and date. Files are validated: a
three-letter code, a positive rate, an ISO date and a source on every line.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import resources
from pathlib import Path

from optimizer.errors import InvalidInput
from optimizer.offer import Offer

_CODE = re.compile(r"^[A-Z]{3}$")
# What a converted offer's source says; kept in one place so readers of ``source`` can find it.
FX_NOTE = "USD at {rate:.6g} USD/{currency} (rate of {day})"
_FX_NOTE_RE = re.compile(r"USD at [0-9.e-]+ USD/[A-Z]{3} \(rate of \d{4}-\d{2}-\d{2}\)")

RateTable = dict[str, list["FxRate"]]


@dataclass(frozen=True, slots=True)
class FxRate:
    currency: str
    rate_to_usd: float  # USD per one unit of ``currency``
    as_of: date
    source: str

    def to_usd(self, amount: float) -> float:
        return amount * self.rate_to_usd

    def note(self) -> str:
        return FX_NOTE.format(rate=self.rate_to_usd, currency=self.currency, day=self.as_of.isoformat())


def read_rates(text: str, origin: str) -> RateTable:
    """Parse and validate a rates CSV (``currency,rate_to_usd,as_of,source``); bad lines raise
    ``InvalidInput`` naming the file and line."""
    table: RateTable = {}
    reader = csv.DictReader(io.StringIO(text))
    missing = {"currency", "rate_to_usd", "as_of", "source"} - set(reader.fieldnames or [])
    if missing:
        raise InvalidInput("fx_file", f"{origin}: missing columns {', '.join(sorted(missing))}")
    for line, row in enumerate(reader, start=2):
        try:
            rate = FxRate(
                currency=row["currency"].strip().upper(),
                rate_to_usd=float(row["rate_to_usd"]),
                as_of=date.fromisoformat(row["as_of"].strip()),
                source=row["source"].strip(),
            )
        except (KeyError, ValueError, AttributeError) as exc:
            raise InvalidInput("fx_file", f"{origin} line {line}: {exc}") from exc
        if not _CODE.match(rate.currency):
            raise InvalidInput("fx_file", f"{origin} line {line}: currency must be a 3-letter code")
        if not rate.rate_to_usd > 0 or rate.rate_to_usd == float("inf"):
            raise InvalidInput("fx_file", f"{origin} line {line}: rate must be > 0")
        if not rate.source:
            raise InvalidInput("fx_file", f"{origin} line {line}: every rate needs a source")
        table.setdefault(rate.currency, []).append(rate)
    for rates in table.values():
        rates.sort(key=lambda r: r.as_of)
    return table


def merge_rates(base: RateTable, extra: RateTable) -> RateTable:
    """``base`` with ``extra``'s rates added; a rate of the same currency and date replaces it."""
    merged: RateTable = {}
    for code in set(base) | set(extra):
        by_day = {r.as_of: r for r in base.get(code, [])}
        by_day.update({r.as_of: r for r in extra.get(code, [])})
        merged[code] = sorted(by_day.values(), key=lambda r: r.as_of)
    return merged


def bundled_rates() -> RateTable:
    text = resources.files("pricing.snapshot").joinpath("data/fx_rates.csv").read_text("utf-8")
    return read_rates(text, "fx_rates.csv")


@lru_cache(maxsize=8)
def _rates(rates_file: str | None) -> RateTable:
    if rates_file is None:
        return bundled_rates()
    path = Path(rates_file)
    if not path.is_file():
        raise InvalidInput("fx_file", f"no such file: {rates_file}")
    return merge_rates(bundled_rates(), read_rates(path.read_text(encoding="utf-8"), str(path)))


def rate_table(rates_file: str | None = None) -> RateTable:
    """The bundled table, with ``rates_file``'s rates merged in when given (validated)."""
    return _rates(rates_file)


def rate_on(table: RateTable, currency: str, on: date | None = None) -> FxRate:
    """The rate for a price of ``currency`` dated ``on`` (the newest rate when ``on`` is None)."""
    code = currency.strip().upper()
    rates = table.get(code)
    if not rates:
        known = ", ".join(sorted(table))
        raise InvalidInput("currency", f"no exchange rate for {currency!r} (known: {known})")
    if on is None:
        return rates[-1]
    earlier = [r for r in rates if r.as_of <= on]
    if earlier:
        return earlier[-1]
    return rates[0]


def fx_rate(currency: str, rates_file: str | None = None, on: date | None = None) -> FxRate:
    """The newest rate for ``currency`` (the rate for a price dated ``on`` when given)."""
    return rate_on(_rates(rates_file), currency, on)


def to_usd(amount: float, currency: str, rates_file: str | None = None, on: date | None = None) -> float:
    return fx_rate(currency, rates_file, on).to_usd(amount)


def _with_note(source: str, rate: FxRate) -> str:
    stripped = _FX_NOTE_RE.sub("", source).rstrip("; ")
    return f"{stripped}; {rate.note()}"


def convert_offer(offer: Offer, table: RateTable) -> Offer:
    """``offer`` with its USD prices recomputed from the native ones at the rate of its date."""
    if offer.currency.upper() == "USD" or offer.price_hour_native is None and offer.spot_price_hour_native is None:
        return offer
    rate = rate_on(table, offer.currency, offer.as_of.date())
    price = round(rate.to_usd(offer.price_hour_native), 6) if offer.price_hour_native else offer.price_hour
    spot = (
        round(rate.to_usd(offer.spot_price_hour_native), 6)
        if offer.spot_price_hour_native
        else offer.spot_price_hour
    )
    return offer.model_copy(
        update={"price_hour": price, "spot_price_hour": spot, "source": _with_note(offer.source, rate)}
    )


def convert_offers(offers: Iterable[Offer], table: RateTable) -> list[Offer]:
    """Every non-USD offer re-priced at the rate of its own date; USD offers unchanged. Pure."""
    return [convert_offer(o, table) for o in offers]


def rate_note(offer: Offer) -> str | None:
    """The rate a converted offer names in its source (None for USD offers)."""
    found = _FX_NOTE_RE.search(offer.source)
    return found.group(0) if found else None
