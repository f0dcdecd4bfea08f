"""Reading current prices: offers and builds of every provider's current snapshot, memoised per
process and keyed by the set of current snapshots. Mixed into ``PriceStore``, on its transactions."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic.fields import FieldInfo
from sqlalchemy import select

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import gpu_family
from optimizer.offer import LocalBuild, Offer
from pricing.price_view import PriceView
from pricing.store.peek import CURRENT_SQL, Current, currents_from, snapshot_key
from pricing.store.rows import _OFFER_FIELDS, LOCAL, _builds, _offers
from pricing.store.steady import steady_read


def _did_you_mean(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _build_named(builds: Sequence[LocalBuild], build_id: str) -> LocalBuild:
    for build in builds:
        if build.id == build_id:
            return build
    ids = [b.id for b in builds]
    raise InvalidInput("buy.build", f"unknown build {build_id!r}{_did_you_mean(build_id, ids)}")


def _default_of(field: FieldInfo) -> Callable[[dict[str, Any]], Any]:
    """``field.get_default(call_default_factory=True, validated_data=...)`` as a function of the
    fields so far, with the factory's signature looked at once instead of on every call."""
    factory = field.default_factory
    if factory is None:
        return functools.partial(_plain_default, field)
    if field.default_factory_takes_validated_data:
        return factory  # type: ignore[return-value]
    return lambda _values: factory()  # type: ignore[call-arg]


def _plain_default(field: FieldInfo, values: dict[str, Any]) -> Any:
    return field.get_default(call_default_factory=True, validated_data=values)


def _offer_builder() -> Callable[[dict[str, Any]], Offer]:
    """What ``Offer.model_construct(**row)`` returns, for rows of exactly the stored columns,
    made without its per-field alias and default lookups: those cost most of a CLI quote's
    load of thousands of offers. Falls back to ``model_construct`` where an Offer needs more
    than a plain fill (aliases, post-init, extra fields, a required field not stored)."""
    fields = Offer.__pydantic_fields__
    stored = [n for n in _OFFER_FIELDS if n in fields]
    missing = [n for n in fields if n not in stored]
    if (Offer.__pydantic_post_init__ or Offer.model_config.get("extra") == "allow"
            or len(stored) != len(_OFFER_FIELDS)
            or any(f.alias is not None or f.validation_alias is not None for f in fields.values())
            or any(fields[n].is_required() for n in missing)):
        return lambda row: Offer.model_construct(**row)
    order = list(fields)
    fields_set = frozenset(stored)
    factory = {n: _default_of(fields[n]) for n in missing}
    new, put = Offer.__new__, object.__setattr__

    def build(row: dict[str, Any]) -> Offer:
        m = new(Offer)
        # model_construct's dict: every field, in declaration order (dumps keep that order); a
        # default factory sees the fields before it, as there.
        values: dict[str, Any] = {}
        for n in order:
            values[n] = row[n] if n in fields_set else factory[n](values)
        put(m, "__dict__", values)
        put(m, "__pydantic_fields_set__", set(fields_set))
        put(m, "__pydantic_extra__", None)
        put(m, "__pydantic_private__", None)
        return m

    return build


class Reads:
    """Current-price reads of ``PriceStore``."""

    def current_rows(self, provider: str) -> int | None:
        """Row count of ``provider``'s current snapshot, None if it has none."""
        self.ensure_seeded()
        with self._read() as conn:
            row = self._current_of(conn, provider)
        return int(row.row_count) if row else None

    def _currents(self) -> list[Current]:
        # Every answer asks this once: as plain SQL it costs a third of the Core statement's time,
        # and nothing while no commit has landed since the last time (``PriceStore.steady``).
        return list(steady_read(self, "currents", self._read_currents))

    def _read_currents(self) -> list[Current]:
        with self._read() as conn:
            return currents_from(conn.exec_driver_sql(CURRENT_SQL).fetchall())

    @staticmethod
    def _version(currents: Sequence[Current]) -> tuple[tuple[str, int], ...]:
        return tuple((c.provider, c.id) for c in currents)

    # The user's view of prices (dated currency conversion, price book): set by whoever opens
    # the store for answering (``pricing.price_view.PriceView``); None serves stored rows as-is.
    price_view: PriceView | None = None

    def current(self) -> CurrentPrices:
        """The current snapshots as read now, for one answer: every read through it (offers,
        builds, dates, id) comes from this same set, even if a refresh lands meanwhile, and the
        store is asked which snapshots are current once, not once per read."""
        self.ensure_seeded()
        return CurrentPrices(self, self._currents())

    def all_offers(self) -> list[Offer]:
        """Every offer of every provider's current snapshot (a new list each call), as the
        store's ``price_view`` shows them."""
        return self.current().all_offers()

    def _offers_of(self, currents: Sequence[Current], view: PriceView | None) -> list[Offer]:
        version = self._version(currents)
        key = (*version, ("~view", id(view)))
        memo = self._offers_memo
        if memo is not None and memo[0] == key:
            return list(memo[1])
        with self._lock:
            memo = self._offers_memo
            if memo is None or memo[0] != key:
                offers = self._load_offers([i for _, i in version])
                memo = (key, view.apply(offers) if view is not None else offers)
                self._offers_memo = memo
        return list(memo[1])

    def _load_offers(self, snapshot_ids: list[int]) -> list[Offer]:
        if not snapshot_ids:
            return []
        cols = [_offers.c[name] for name in _OFFER_FIELDS]
        stmt = (
            select(*cols)
            .where(_offers.c.snapshot_id.in_(snapshot_ids))
            .order_by(_offers.c.provider, _offers.c.region, _offers.c.zone, _offers.c.instance_type)
        )
        build = _offer_builder()
        with self._read() as conn:
            # Rows were validated as Offer on the way in; constructing skips a second validation.
            # Every column reads back as its field's type (commitments as models: CommitmentsJson).
            return [build(row._asdict()) for row in conn.execute(stmt)]

    def offers(
        self,
        gpu: str | None = None,
        gpu_count: float | None = None,
        providers: Sequence[str] | None = None,
        regions: Sequence[str] | None = None,
        spot: bool = False,
        max_hourly: float | None = None,
        limit: int | None = None,
    ) -> list[Offer]:
        """Matching current offers, cheapest first (by spot price with ``spot``).

        Offers without the price being ranked on are left out.
        """
        want_gpus = set(gpu_family(gpu)) if gpu else None  # "H100": its SXM and PCIe boards
        want_providers = {p.strip().lower() for p in providers} if providers else None
        want_regions = {r.strip().lower() for r in regions} if regions else None

        def price(o: Offer) -> float | None:
            return o.spot_price_hour if spot else o.price_hour

        chosen = [
            o
            for o in self.all_offers()
            if (p := price(o)) is not None
            and (want_gpus is None or o.gpu in want_gpus)
            and (gpu_count is None or o.gpu_count == gpu_count)
            and (want_providers is None or o.provider in want_providers)
            and (want_regions is None or o.region.lower() in want_regions)
            and (max_hourly is None or p <= max_hourly)
        ]
        chosen.sort(key=lambda o: (price(o), o.provider, o.region, o.zone or "", o.instance_type))
        return chosen[:limit] if limit is not None else chosen

    def local_builds(self) -> list[LocalBuild]:
        return self.current().local_builds()

    def _builds_of(self, currents: Sequence[Current]) -> list[LocalBuild]:
        version = self._version(currents)
        memo = self._builds_memo
        if memo is None or memo[0] != version:
            ids = [c.id for c in currents if c.provider == LOCAL]
            memo = (version, self._load_builds(ids))
            self._builds_memo = memo
        return list(memo[1])

    def _load_builds(self, snapshot_ids: list[int]) -> list[LocalBuild]:
        if not snapshot_ids:
            return []
        stmt = select(_builds).where(_builds.c.snapshot_id.in_(snapshot_ids)).order_by(_builds.c.build_id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [LocalBuild.model_validate({**r.attrs, "parts": r.parts}) for r in rows]

    def local_build(self, build_id: str) -> LocalBuild:
        return _build_named(self.local_builds(), build_id)

    def prices_as_of(self) -> dict[str, datetime]:
        return self.current().prices_as_of()

    def snapshot_id(self) -> str:
        """Stable id of the current set of snapshots: equal content gives the same id anywhere."""
        return self.current().snapshot_id()


class CurrentPrices:
    """One read of which snapshots are current (``Reads.current``), and the reads an answer makes
    of them: offers as the store's price view shows them, local builds, dates and the id."""

    def __init__(self, store: Reads, currents: list[Current]) -> None:
        self._store = store
        self._currents = currents
        self.price_view = store.price_view

    def current(self) -> CurrentPrices:
        return self

    def all_offers(self) -> list[Offer]:
        return self._store._offers_of(self._currents, self.price_view)

    def local_builds(self) -> list[LocalBuild]:
        return self._store._builds_of(self._currents)

    def local_build(self, build_id: str) -> LocalBuild:
        return _build_named(self.local_builds(), build_id)

    def prices_as_of(self) -> dict[str, datetime]:
        return {c.provider: c.as_of for c in self._currents}

    def snapshot_id(self) -> str:
        view = self.price_view
        return snapshot_key(self._currents, view.fingerprint if view is not None else None)
