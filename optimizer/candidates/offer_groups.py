"""Offers that can never win, set aside once per price snapshot.

What an option costs depends on an offer only through its price (on demand, spot), its host (RAM,
vCPUs) and what the estimate and the bill read: the GPU, GPUs per instance, VRAM, the links between
the GPUs and between instances, and the billing rule. Offers that agree on all of that form a
*group*; within it every configuration (nodes, sharding, recipe) has the same hours, and its cost
is the offer's price times a factor the offer does not change. So an offer whose price is no lower
and whose host is no larger than another's in its group is never cheaper for any workload,
deadline or budget: it is *dominated*, and a quote need not look at it.

Constraints still filter what is left correctly because the groups never span what a constraint
can tell apart:

* providers (and per-provider quotas, block storage, price books): the provider is part of the
  group, so the kept rows of the wanted providers are exactly what the full list would yield;
* regions: a second frontier is kept per (provider, region) and used when regions are named;
* GPUs and max GPUs: the GPU and the count are part of the group;
* spot: without spot only on-demand prices count (a smaller frontier); with spot an offer must be
  beaten on both prices, missing prices counting as infinitely dear, by an offer of the same
  reclaim rate and notice (``optimizer.spot_risk``);
* commitments (reserved, savings-plan, capacity-block terms): a plan commits to the offer whose
  committed run is cheapest and a quote shows each option's terms, so an offer is only set aside
  by one whose terms are at least as cheap per kind, term and payment
  (``optimizer.candidates.commitment_cover``).

``OfferIndex.build(offers)`` prepares nothing up front; each of the four frontiers (provider or
region level, with or without spot) is computed on first use and kept. ``index_for(key, load)``
keeps the index of the last few price snapshots, keyed by the store's snapshot id, so a quote
touches a few hundred rows however large the catalog grows. What the view leaves out is counted by
reason (``left_out``) so an answer can still account for every offer.

``OfferIndex.prepared()`` computes everything at once and keeps only the offers some view can
return, with the counts and usual price levels of all of them: a small, picklable index that a
short-lived process (a CLI command) loads instead of the whole snapshot (``remember_index``).
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

from optimizer.candidates.commitment_cover import Terms, covers, sort_rate, terms_of
from optimizer.candidates.estimator import _canonical
from optimizer.candidates.rejections import EXCLUDED, NO_PRICE
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.workload import Constraints
from optimizer.offer import Offer
from optimizer.price_warnings import price_screen, usual_levels
from optimizer.results import RejectedGroup
from optimizer.spot_risk import spot_rate
from optimizer.subscriptions import subscription_of

DOMINATED = "dominated (an offer of the same GPU and provider costs no more with at least its vCPUs and RAM)"
MAX_EXAMPLES = 3
INDEXES_KEPT = 4
VIEWS_KEPT = 256

_INF = float("inf")
# (price, spot price, -RAM, -vCPUs, cheapest committed term, catalog place) of one offer in a group.
_Row = tuple[float, float, float, float, float, int]
# (provider, region, canonical GPU or the raw name): the finest cell a constraint can select.
Cell = tuple[str, str, str]


def group_key(o: Offer, gpu: str) -> tuple[object, ...]:
    """Everything but price and host that the estimate or the bill reads from an offer."""
    return (
        o.provider.lower(), gpu, o.gpu_count, o.gpu_vram_gb, o.interconnect,
        getattr(o, "inter_node_fabric", None), getattr(o, "storage_usd_per_gb_month", None),
        o.billing_increment_s, o.min_billing_s,
        # A subscription plan's limits change the hours (``optimizer.subscriptions``).
        plan.plan if (plan := subscription_of(o.provider, o.instance_type)) else None,
    )


def _label(o: Offer) -> str:
    return f"{o.provider}/{o.instance_type}"


@dataclass(slots=True)
class _Frontier:
    """One way of pruning: kept offers per cell (in catalog order) and what was left out."""

    kept: dict[Cell, list[int]] = field(default_factory=dict)
    dominated: dict[Cell, int] = field(default_factory=dict)
    no_price: dict[Cell, int] = field(default_factory=dict)
    examples: dict[tuple[Cell, str], list[str]] = field(default_factory=dict)
    # Screened frontiers: offers left with no usable price once suspect prices are set aside, by reason.
    suspect: dict[Cell, dict[str, int]] = field(default_factory=dict)


class OfferList(list[Offer]):
    """Every offer of one snapshot (or a view's part of them), with room for figures derived from
    all of them once (the usual price levels of ``optimizer.price_warnings``).

    Shared by every request that reads the snapshot, and never changed once made: what is derived
    from one (the groups a filter makes, ``candidates.cloud._filter_offers``; the vCPUs per instance,
    ``quotas.vcpus_lookup``, and the offers with commitments, ``commitments.offers_by_key``, both
    through ``kept_per_list``) is kept per list object. Changing one in place raises."""

    def __init__(self, offers: Iterable[Offer] = ()) -> None:
        super().__init__(offers)
        self.usual_levels_memo: dict[tuple[str, str], float] = {}

    def _unchanged(self, *_: Any, **__: Any) -> NoReturn:
        raise TypeError("an OfferList is shared and never changed: make a new one")

    append = extend = insert = remove = pop = clear = sort = reverse = _unchanged
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _unchanged

    def __reduce__(self) -> tuple[Any, ...]:
        # A list subclass is unpickled by appending its items: made whole instead (the prepared
        # snapshot, ``service.prepared``, pickles the index that holds these).
        return _offer_list, (list(self), self.__dict__)

    def part(self, offers: Iterable[Offer]) -> OfferList:
        """Some of these offers, carrying this snapshot's usual price levels (computed here first).

        A quote on a pruned view screens suspect prices (``price_warnings.PriceScreen``) against
        the levels of every offer, as a quote on the whole list does: medians of the kept offers
        alone would call other prices suspect and change the answer."""
        usual_levels(self, set())  # fills this snapshot's memo, so the part never computes its own
        out = OfferList(offers)
        out.usual_levels_memo = self.usual_levels_memo
        return out


def _offer_list(offers: list[Offer], state: dict[str, Any]) -> OfferList:
    out = OfferList(offers)
    out.__dict__.update(state)
    return out


T = TypeVar("T")


def kept_per_list(memo: LruMemo[int, tuple[list[Offer], T]], offers: Iterable[Offer], make: Callable[[], T]) -> T:
    """``make()``, a figure derived from all of ``offers``: kept in ``memo`` when they are an
    ``OfferList`` (never changed), made each time from any other iterable (which may change between
    calls). Keyed by the list's id; each entry holds the list, so the id cannot belong to another
    object while the entry lives. What is kept is shared by every caller: read it, never change it."""
    if isinstance(offers, OfferList):
        return memo.get_or_compute(id(offers), lambda: (offers, make()))[1]
    return make()


@dataclass(frozen=True, slots=True)
class OfferView:
    """The offers a quote needs to look at, and what it may skip, counted by reason."""

    offers: list[Offer]
    left_out: list[RejectedGroup]
    total: int
    catalog: OfferList = field(default_factory=OfferList)  # every offer, for what is usual

    @property
    def skipped(self) -> int:
        return sum(g.count for g in self.left_out)


class OfferIndex:
    """All offers of one price snapshot, with their frontiers computed on first use."""

    def __init__(self, offers: Sequence[Offer]) -> None:
        self.offers = OfferList(offers)
        self._gpu: list[str | None] = [_canonical(o.gpu) for o in self.offers]
        self._cells: list[Cell] = [
            (o.provider.lower(), o.region, g if g is not None else o.gpu)
            for o, g in zip(self.offers, self._gpu, strict=True)
        ]
        self._cell_total: dict[Cell, int] = {}
        self._cell_example: dict[Cell, str] = {}
        for i, c in enumerate(self._cells):
            self._cell_total[c] = self._cell_total.get(c, 0) + 1
            self._cell_example.setdefault(c, _label(self.offers[i]))
        self._frontiers: dict[tuple[bool, bool, bool], _Frontier] = {}
        self._total = len(self.offers)
        # A prepared index holds only its frontiers' offers: it cannot compute another frontier,
        # and asks ``_fuller`` (if set) for an index that can.
        self._complete = True
        self._fuller: Callable[[], OfferIndex] | None = None
        self._fuller_made: OfferIndex | None = None
        self._views: OrderedDict[tuple[object, ...], OfferView] = OrderedDict()
        self._lock = threading.RLock()

    @classmethod
    def build(cls, offers: Iterable[Offer]) -> OfferIndex:
        return cls(list(offers))

    def __len__(self) -> int:
        return self._total

    def prepared(self, regions: bool = True) -> OfferIndex:
        """The same index with its frontiers and the catalog's usual price levels computed, holding
        only the offers some view can return: every view, or with ``regions=False`` those that
        name no regions (a quarter of the offers). Its views equal this index's views (offers,
        what is left out and why, the total); it is what gets stored per snapshot."""
        levels = (False, True) if regions else (False,)
        wanted = [(by_region, spot, screened) for by_region in levels for spot in (False, True)
                  for screened in (False, True)]
        if not self._complete and any(k not in self._frontiers for k in wanted):
            # A prepared index holds only its own frontiers' offers: a frontier computed from them
            # keeps offers the whole catalog sets aside and misses ones it keeps (a plan naming
            # regions saw 1 of 6 offers after a store's file was written from such an index).
            return self._fuller_index().prepared(regions)
        for by_region in levels:
            for spot in (False, True):
                for screened in (False, True):
                    self._frontier(by_region, spot, screened)
        usual_levels(self.offers, set())  # fills the catalog's memo of levels
        chosen = {k: f for k, f in self._frontiers.items() if k[0] in levels}
        used = sorted({i for f in chosen.values() for kept in f.kept.values() for i in kept})
        new_of = {old: new for new, old in enumerate(used)}
        out = OfferIndex([])
        out.offers = OfferList(self.offers[i] for i in used)
        out.offers.usual_levels_memo = dict(self.offers.usual_levels_memo)
        out._gpu = [self._gpu[i] for i in used]
        out._cells = [self._cells[i] for i in used]
        out._cell_total = dict(self._cell_total)
        out._cell_example = dict(self._cell_example)
        out._total = self._total
        out._complete = False
        out._frontiers = {
            key: _Frontier(
                kept={cell: [new_of[i] for i in kept] for cell, kept in f.kept.items()},
                dominated=dict(f.dominated), no_price=dict(f.no_price), examples=dict(f.examples),
                suspect={cell: dict(r) for cell, r in f.suspect.items()},
            )
            for key, f in chosen.items()
        }
        return out

    def fall_back_to(self, fuller: Callable[[], OfferIndex]) -> None:
        """Where this prepared index lacks a frontier, answer from ``fuller()`` (asked once)."""
        self._fuller = fuller

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        # A lock does not pickle; views are rebuilt on use; the fallback belongs to its process.
        del state["_lock"], state["_views"], state["_fuller"], state["_fuller_made"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._views = OrderedDict()
        self._lock = threading.RLock()
        self._fuller = None
        self._fuller_made = None

    # -- frontiers ----------------------------------------------------------------------------

    def _frontier(self, by_region: bool, spot: bool, screened: bool = False) -> _Frontier:
        key = (by_region, spot, screened)
        f = self._frontiers.get(key)
        if f is None:
            if not self._complete:
                raise LookupError(f"this prepared index lacks the frontier {key}; its offers are too few to compute it")
            with self._lock:
                f = self._frontiers.get(key)
                if f is None:
                    f = self._frontiers[key] = self._compute(by_region, spot, screened)
        return f

    def _compute(self, by_region: bool, spot: bool, screened: bool = False) -> _Frontier:
        """``screened``: suspect prices (``price_warnings.PriceScreen``) count as missing, so a
        suspect price never sets a plausible offer aside; the quote screens the kept rows again."""
        f = _Frontier()
        groups: dict[tuple[object, ...], list[_Row]] = {}
        # Commitments an offer may only be set aside with (``commitment_cover``), by offer.
        terms: dict[int, Terms] = {}
        screen = price_screen(self.offers, datetime.now(UTC)) if screened else None
        for i, o in enumerate(self.offers):
            cell = self._cells[i]
            gpu = self._gpu[i]
            price = _INF if o.price_hour is None else o.price_hour
            spot_price = _INF if o.spot_price_hour is None else o.spot_price_hour
            usable = price < _INF or (spot and spot_price < _INF)
            if gpu is None:
                # Unknown GPUs stay in the view, so the quote reports them as such.
                f.kept.setdefault(cell, []).append(i)
                continue
            if screen is not None and usable:
                od, sp = screen.reasons(o)
                price = _INF if od else price
                spot_price = _INF if sp else spot_price
                if not (price < _INF or (spot and spot_price < _INF)):
                    why = od or sp or NO_PRICE
                    per = f.suspect.setdefault(cell, {})
                    per[why] = per.get(why, 0) + 1
                    self._example(f, cell, why, o)
                    continue
            if not usable:
                f.no_price[cell] = f.no_price.get(cell, 0) + 1
                self._example(f, cell, NO_PRICE, o)
                continue
            k = group_key(o, gpu)
            if spot:
                # A spot run's cost also reads the offer's reclaim rate and notice (optimizer.spot_risk):
                # a cheaper spot price at a higher rate is not cheaper for every job.
                k = (*k, spot_rate(o.provider, o.region, o.instance_type).key)
            if by_region:
                k = (*k, o.region)
            ram = _INF if o.ram_gb is None else o.ram_gb
            cpu = _INF if o.vcpus is None else o.vcpus
            t = terms_of(o)
            if t is not None:
                terms[i] = t
            groups.setdefault(k, []).append((price, spot_price if spot else 0.0, -ram, -cpu, sort_rate(t), i))
        for rows in groups.values():
            kept = _non_dominated(rows, terms)
            for i in kept:
                f.kept.setdefault(self._cells[i], []).append(i)
            if len(kept) == len(rows):
                continue
            keep = set(kept)
            for *_, i in rows:
                if i not in keep:
                    cell = self._cells[i]
                    f.dominated[cell] = f.dominated.get(cell, 0) + 1
                    self._example(f, cell, DOMINATED, self.offers[i])
        for idx in f.kept.values():
            idx.sort()
        return f

    @staticmethod
    def _example(f: _Frontier, cell: Cell, reason: str, o: Offer) -> None:
        ex = f.examples.setdefault((cell, reason), [])
        if len(ex) < MAX_EXAMPLES:
            label = _label(o)
            if label not in ex:
                ex.append(label)

    # -- views --------------------------------------------------------------------------------

    def view(self, constraints: Constraints | None = None) -> OfferView:
        """The offers a quote under ``constraints`` must see; the best answer is the same as on all.

        Views depend only on the filters (providers, regions, GPUs, spot), so the last
        ``VIEWS_KEPT`` are kept: a repeated kind of request costs a dictionary lookup."""
        c = constraints or Constraints()
        providers = frozenset(p.lower() for p in c.providers) if c.providers else None
        regions = frozenset(c.regions) if c.regions else None
        screened = not c.allow_suspect_prices
        if not self._complete and (regions is not None, bool(c.allow_spot), screened) not in self._frontiers:
            return self._fuller_index().view(constraints)
        gpus = frozenset(_wanted(c) or ()) or None
        key = (providers, regions, gpus, bool(c.allow_spot), screened)
        with self._lock:
            hit = self._views.get(key)
            if hit is not None:
                self._views.move_to_end(key)
                return hit
        out = self._view(providers, regions, gpus, bool(c.allow_spot), screened)
        with self._lock:
            self._views[key] = out
            while len(self._views) > VIEWS_KEPT:
                self._views.popitem(last=False)
        return out

    def _fuller_index(self) -> OfferIndex:
        with self._lock:
            if self._fuller_made is None:
                if self._fuller is None:
                    raise LookupError("this prepared index has no view naming regions, and nowhere to fall back to")
                self._fuller_made = self._fuller()
            return self._fuller_made

    def view_offers(self, constraints: Constraints | None = None) -> list[Offer]:
        return self.view(constraints).offers

    def _view(
        self, providers: frozenset[str] | None, regions: frozenset[str] | None, gpus: frozenset[str] | None,
        allow_spot: bool, screened: bool = False,
    ) -> OfferView:
        f = self._frontier(regions is not None, allow_spot, screened)
        suspect: dict[str, int] = {}
        lists: list[list[int]] = []
        dominated = no_price = excluded = 0
        ex: dict[str, list[str]] = {DOMINATED: [], NO_PRICE: [], EXCLUDED: []}
        for cell, total in self._cell_total.items():
            provider, region, gpu = cell
            if (
                (providers is not None and provider not in providers)
                or (regions is not None and region not in regions)
                or (gpus is not None and gpu not in gpus)
            ):
                excluded += total
                _add_example(ex[EXCLUDED], self._cell_example[cell])
                continue
            kept = f.kept.get(cell)
            if kept:
                lists.append(kept)
            d = f.dominated.get(cell, 0)
            if d:
                dominated += d
                for e in f.examples.get((cell, DOMINATED), ()):
                    _add_example(ex[DOMINATED], e)
            n = f.no_price.get(cell, 0)
            if n:
                no_price += n
                for e in f.examples.get((cell, NO_PRICE), ()):
                    _add_example(ex[NO_PRICE], e)
            for why, k in f.suspect.get(cell, {}).items():
                suspect[why] = suspect.get(why, 0) + k
                for e in f.examples.get((cell, why), ()):
                    _add_example(ex.setdefault(why, []), e)
        # Catalog order, as the full list has it, so ties between equal offers break the same way.
        picked = self.offers.part(
            [self.offers[i] for i in heapq.merge(*lists)] if len(lists) > 1 else (
                [self.offers[i] for i in lists[0]] if lists else []
            )
        )
        left_out = [
            RejectedGroup(reason=r, count=n, examples=ex[r])
            for r, n in ((DOMINATED, dominated), (NO_PRICE, no_price), (EXCLUDED, excluded), *suspect.items())
            if n
        ]
        return OfferView(offers=picked, left_out=left_out, total=self._total, catalog=self.offers)


def _add_example(examples: list[str], label: str) -> None:
    if len(examples) < MAX_EXAMPLES and label not in examples:
        examples.append(label)


def _wanted(c: Constraints) -> set[str] | None:
    if not c.gpus:
        return None
    from optimizer.candidates.estimator import _wanted_gpus

    return _wanted_gpus(c)


def _non_dominated(rows: list[_Row], terms: dict[int, Terms] | None = None) -> list[int]:
    """Indices of rows no other row beats or equals on price, spot price, RAM and vCPUs while
    covering its commitments (``commitment_cover``: as cheap per term and payment).

    Rows are ``(price, spot, -ram, -vcpus, cheapest term, index)``; sorted, a row can only be
    dominated by one before it, and of exact equals the first in catalog order is kept.
    """
    if len(rows) == 1:
        return [rows[0][5]]
    terms = terms or {}
    out: list[_Row] = []
    for r in sorted(rows):
        _, s, nram, ncpu, _, i = r
        mine = terms.get(i)
        if any(k[1] <= s and k[2] <= nram and k[3] <= ncpu and covers(terms.get(k[5]), mine) for k in out):
            continue
        out.append(r)
    return [r[5] for r in out]


def merge_rejected(groups: Sequence[RejectedGroup], left_out: Sequence[RejectedGroup]) -> list[RejectedGroup]:
    """A quote's rejections plus what its view left out, one row per reason, most frequent first."""
    by: dict[str, RejectedGroup] = {}
    for g in [*groups, *left_out]:
        cur = by.get(g.reason)
        if cur is None:
            by[g.reason] = RejectedGroup(reason=g.reason, count=g.count, examples=list(g.examples))
        else:
            cur.count += g.count
            for e in g.examples:
                _add_example(cur.examples, e)
    return sorted(by.values(), key=lambda g: (-g.count, g.reason))


_INDEXES: OrderedDict[str, OfferIndex] = OrderedDict()
_INDEXES_LOCK = threading.Lock()


def index_for(key: str, load: Callable[[], Sequence[Offer]]) -> OfferIndex:
    """The index of the snapshot ``key`` (a content id), built from ``load()`` on first use.

    The last ``INDEXES_KEPT`` snapshots are kept, so memory stays bounded across refreshes.
    """
    with _INDEXES_LOCK:
        hit = _INDEXES.get(key)
        if hit is not None:
            _INDEXES.move_to_end(key)
            return hit
    idx = OfferIndex.build(load())
    remember_index(key, idx)
    return idx


def remember_index(key: str, index: OfferIndex) -> None:
    """Use ``index`` (e.g. a stored ``prepared()`` one) for the snapshot ``key`` from now on."""
    with _INDEXES_LOCK:
        _INDEXES[key] = index
        _INDEXES.move_to_end(key)
        while len(_INDEXES) > INDEXES_KEPT:
            _INDEXES.popitem(last=False)


def clear_indexes() -> None:
    with _INDEXES_LOCK:
        _INDEXES.clear()
