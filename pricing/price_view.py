"""The offers a user sees: stored list prices in USD at the rate of each price's date, with the
user's price book (discounts, negotiated prices, on-prem nodes) applied.

Applied once, where the store hands out its current offers (``PriceStore.all_offers``), so
every answer that reads offers (offers, quote, break-even, plan, recommend, frontier) sees the
same prices over HTTP and in the CLI.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from optimizer.errors import InvalidInput
from optimizer.offer import Offer
from pricing.currency import RateTable, convert_offers, rate_table
from pricing.pricebook import PriceBook, apply_price_book, load_price_book

T = TypeVar("T")


@dataclass(frozen=True)
class PriceView:
    rates: RateTable
    book: PriceBook | None = None
    book_path: str | None = None
    fx_file: str | None = None
    # Prices older than this are called stale in answers (``GPUCOST_STALE_AFTER_DAYS``).
    stale_after_days: float = 3.0

    @cached_property
    def fingerprint(self) -> str:
        """Changes with anything that changes prices, so answers cached per snapshot id and
        computed under another book or rates table are not reused. Worked out once per view: a
        view is made whole and never changed, and every answer's snapshot id reads this (py-spy
        put ~2 % of a served restricted quote's interpreter time in it; ``bench/ab_quotes.py``
        then saw x0.99, within noise)."""
        digest = hashlib.sha256()
        digest.update((self.book.model_dump_json() if self.book else "-").encode())
        for code in sorted(self.rates):
            for r in self.rates[code]:
                digest.update(f"{code}:{r.rate_to_usd!r}:{r.as_of}\n".encode())
        return digest.hexdigest()[:16]

    def apply(self, offers: Iterable[Offer]) -> list[Offer]:
        """Pure: offers re-priced at their dated rates, then the book applied."""
        return apply_price_book(convert_offers(offers, self.rates), self.book)


def price_view(
    price_book: str | None = None, fx_file: str | None = None, stale_after_days: float = 3.0
) -> PriceView:
    """The view for a price book path and a rates file path (either may be None).

    A missing or invalid file raises ``InvalidInput`` naming it (CLI exit 2; the server
    refuses to start).
    """
    book = None
    if price_book:
        if not Path(price_book).is_file():
            raise InvalidInput("price_book", f"GPUCOST_PRICE_BOOK: no such file: {price_book}")
        book = _named("GPUCOST_PRICE_BOOK", price_book, load_price_book, price_book)
    if fx_file and not Path(fx_file).is_file():
        raise InvalidInput("fx_file", f"GPUCOST_FX_FILE: no such file: {fx_file}")
    rates = _named("GPUCOST_FX_FILE", fx_file, rate_table, fx_file or None)
    return PriceView(rates=rates, book=book, book_path=price_book, fx_file=fx_file,
                     stale_after_days=stale_after_days)


def _named(variable: str, path: str | None, read: Callable[[Any], T], arg: Any) -> T:
    """``read(arg)``; a file it cannot read at all (binary, not UTF-8, malformed CSV) is an
    ``InvalidInput`` naming the variable and the file, like the errors ``read`` reports itself."""
    try:
        return read(arg)
    except InvalidInput:
        raise
    except (UnicodeDecodeError, ValueError, csv.Error, OSError, KeyError, TypeError) as exc:
        what = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"{type(exc).__name__}: {exc}"
        raise InvalidInput(variable, f"cannot read {path}: {what[:200]}") from None
