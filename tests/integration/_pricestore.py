"""Shared pieces of the store, refresh, prices API and CLI tests.

Prices come from real public data only: the bundled snapshot (``load_bundled``) and the reference
SkyPilot catalog (``tests/data/reference/skypilot-catalog``, catalog v8 except runpod v7), read with
the product's own importer. Where a test needs a *changed* price list it derives one from these
rows by a stated factor; no price here is typed in by hand.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import pytest

from optimizer.offer import Offer
from pricing.source import RawSnapshot, SourceSettings

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference"
CATALOG = REFERENCE / "skypilot-catalog"
# The date the tests pretend the catalog rows were priced; a parameter of the tests, not a price.
CATALOG_AS_OF = datetime(2026, 11, 1, tzinfo=UTC)

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@contextmanager
def fresh_pg_database(base_url: str) -> Iterator[str]:
    """A new, empty database on the server of ``base_url``; dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"gpucost_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def backend_url(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'prices.sqlite'}"
        return
    base = request.getfixturevalue("pg_url")
    with fresh_pg_database(base) as url:
        yield url


@lru_cache(maxsize=None)
def _catalog(cloud: str) -> tuple[Offer, ...]:
    from pricing.adapters.skypilot_csv import load_skypilot

    return tuple(load_skypilot(CATALOG / cloud / "vms.csv", as_of=CATALOG_AS_OF))


def catalog_offers(cloud: str, as_of: datetime = CATALOG_AS_OF) -> list[Offer]:
    """Every offer of one cloud in the reference SkyPilot catalog, dated ``as_of``."""
    return [o.model_copy(update={"as_of": as_of}) for o in _catalog(cloud)]


def scaled(offers: list[Offer], factor: float, as_of: datetime) -> list[Offer]:
    """The same offers with every price multiplied by ``factor``: a synthetic price change."""

    def mul(v: float | None) -> float | None:
        return None if v is None else round(v * factor, 6)

    return [
        o.model_copy(update={
            "price_hour": mul(o.price_hour), "spot_price_hour": mul(o.spot_price_hour),
            "price_hour_native": mul(o.price_hour_native), "as_of": as_of,
        })
        for o in offers
    ]


class FakeSource:
    """A price source whose payload is a list of offers, with faults to inject.

    ``faults`` is consumed one per ``fetch`` call: an exception instance is raised, ``None``
    returns the payload.
    """

    name: ClassVar[str] = "fake"

    def __init__(self, name: str, offers: list[Offer], faults: list[BaseException | None] | None = None,
                 parse_hook: Callable[[RawSnapshot], list[Offer]] | None = None) -> None:
        self.name = name  # type: ignore[misc]
        self.offers = offers
        self.faults = list(faults or [])
        self.parse_hook = parse_hook
        self.fetches = 0

    def factory(self) -> Callable[[SourceSettings], FakeSource]:
        return lambda _settings: self

    def fetch(self) -> RawSnapshot:
        self.fetches += 1
        if self.faults:
            fault = self.faults.pop(0)
            if fault is not None:
                raise fault
        payload = [o.model_dump(mode="json") for o in self.offers]
        return RawSnapshot(provider=self.name, fetched_at=datetime.now(UTC), payloads={"offers": payload})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        if self.parse_hook is not None:
            return self.parse_hook(raw)
        return [Offer.model_validate(o) for o in raw.payloads["offers"]]


FAST_RETRIES = SourceSettings(extra={"retry_attempts": 3, "retry_wait_s": 0.001, "retry_max_wait_s": 0.01})


def days_ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


def price_of(offers: list[Offer], key: tuple[str, str, str, str]) -> Any:
    return next(o.price_hour for o in offers if o.key == key)
