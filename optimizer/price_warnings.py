"""Warnings about the prices a quote rests on, checked when the quote is made.

- Stale: a provider whose prices are older than ``stale_after_days`` (``GPUCOST_STALE_AFTER_DAYS``),
  with their age, for every provider among the quoted options.
- Implausible: an option whose per-GPU price is far from its provider's usual level for that GPU
  (the median per-GPU on-demand price of the provider's offers of that GPU): on demand outside
  [1/3, 2] times it, or spot under ``SPOT_FLOOR`` of it or above the on-demand price. Spot
  markets do run at a tenth of list price for a while, but a plan resting on one should know it.
- Converted: an option priced in another currency names the rate it was converted at.

Pure: offers, options and the time come in as arguments.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median

from optimizer.estimator.memo import LruMemo
from optimizer.offer import Offer
from optimizer.results import Option

DEFAULT_STALE_AFTER_DAYS = 3.0
FAR_FACTOR = 2.0  # on demand: more than 2x the provider's median for the GPU
# ... or under a third of it. Not a half: the median is lifted by host-heavy instances, and the
# smallest real instances sit near half of it (AWS g6.xlarge at $0.80 per L4-hour, 0.42x AWS's L4
# median of $1.90 in the bundled catalog of 2025-11-30).
FAR_LOW_FACTOR = 3.0
SPOT_FLOOR = 0.15  # spot under 15% of the provider's on-demand median: about 1/7 or less
_FX_NOTE = re.compile(r"USD at [0-9.e-]+ USD/[A-Z]{3} \(rate of \d{4}-\d{2}-\d{2}\)")


def _age_text(days: float) -> str:
    if days >= 60:
        return f"{days / 30.44:.0f} months"
    return f"{days:.0f} days" if days >= 2 else f"{days * 24:.0f} hours"


def stale_warnings(
    providers: Iterable[str], prices_as_of: Mapping[str, datetime], *, now: datetime, stale_after_days: float
) -> list[str]:
    out = []
    for provider in sorted(set(providers)):
        as_of = prices_as_of.get(provider)
        if as_of is None:
            continue
        days = (now - as_of).total_seconds() / 86400
        if days > stale_after_days:
            out.append(
                f"stale prices: {provider} prices are {_age_text(days)} old (as of {as_of.date().isoformat()}; "
                f"stale after {stale_after_days:g} days) - refresh them or check the provider's page"
            )
    return out


def _per_gpu(price: float | None, offer: Offer) -> float | None:
    return price / offer.gpu_count if price else None


def usual_levels(offers: Iterable[Offer], wanted: set[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """Median per-GPU on-demand price of each (provider, GPU) in ``wanted``.

    A catalog that carries a ``usual_levels_memo`` dict (``offer_groups.OfferList``: one per price
    snapshot) has every level computed once, so a quote does not rescan the whole catalog."""
    memo = getattr(offers, "usual_levels_memo", None)
    if memo is not None:
        if not memo:
            memo.update(usual_levels(list(offers), {(o.provider, o.gpu) for o in offers}) or {("", ""): 0.0})
        return {k: v for k, v in memo.items() if k in wanted}
    prices: dict[tuple[str, str], list[float]] = {}
    for o in offers:
        key = (o.provider, o.gpu)
        if key in wanted and o.price_hour:
            prices.setdefault(key, []).append(o.price_hour / o.gpu_count)
    return {k: median(v) for k, v in prices.items() if len(v) >= 3}


def _offer_of(option: Option, by_key: Mapping[tuple[str, str, str], list[Offer]]) -> Offer | None:
    found = by_key.get((option.provider, option.region or "", option.instance_type)) or []
    for o in found:
        if (o.zone or None) == (option.zone or None):
            return o
    return found[0] if found else None


_TypeKey = tuple[str, "str | None", str]
# Each shared offer list's offers by (provider, region, instance type), with their places in it: a
# quote looks up the few its options name rather than scanning every offer. Kept per list object
# (``offer_groups.OfferList``, never changed); each entry holds its list, so the id stays its own.
_BY_TYPE: LruMemo[int, tuple[Sequence[Offer], dict[_TypeKey, list[tuple[int, Offer]]]]] = LruMemo(64)


def _offers_of_types(offers: Sequence[Offer], wanted: set[tuple[str, str, str]]) -> list[tuple[int, Offer]]:
    """The offers of ``wanted`` (provider, region or "", instance type) types, with their places,
    in the order of ``offers``."""
    from optimizer.candidates.offer_groups import OfferList

    if not isinstance(offers, OfferList):
        return [(i, off) for i, off in enumerate(offers) if (off.provider, off.region, off.instance_type) in wanted]

    def index() -> dict[_TypeKey, list[tuple[int, Offer]]]:
        table: dict[_TypeKey, list[tuple[int, Offer]]] = {}
        for i, off in enumerate(offers):
            table.setdefault((off.provider, off.region, off.instance_type), []).append((i, off))
        return table

    table = _BY_TYPE.get_or_compute(id(offers), lambda: (offers, index()))[1]
    # An offer without a region is never wanted: options name theirs as "" (as scanning compared).
    return sorted((row for k in wanted for row in table.get(k, ())), key=lambda row: row[0])


def implausible_warnings(
    options: Sequence[Option], offers: Sequence[Offer], reference: Sequence[Offer] | None = None
) -> list[str]:
    """``offers`` hold the options' own rows; usual levels come from ``reference`` (default: ``offers``)."""
    cloud = [o for o in options if o.kind == "cloud"]
    if not cloud:
        return []
    wanted_types = {(o.provider, o.region or "", o.instance_type) for o in cloud}
    by_key: dict[tuple[str, str, str], list[Offer]] = {}
    for _, off in _offers_of_types(offers, wanted_types):
        by_key.setdefault((off.provider, off.region, off.instance_type), []).append(off)  # type: ignore[arg-type]
    levels = usual_levels(offers if reference is None else reference, {(o.provider, o.gpu) for o in cloud})
    out: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for opt in cloud:
        offer = _offer_of(opt, by_key)
        usual = levels.get((opt.provider, opt.gpu))
        if offer is None or usual is None:
            continue
        where = f"{opt.provider}/{opt.instance_type}"
        key = (where, opt.region or "", opt.pricing)
        if key in seen:
            continue
        seen.add(key)
        if opt.pricing == "spot":
            spot = _per_gpu(offer.spot_price_hour, offer)
            on_demand = _per_gpu(offer.price_hour, offer)
            if spot is None:
                continue
            if spot < SPOT_FLOOR * usual:
                out.append(
                    f"implausible price: {where} spot ${spot:.3g}/GPU-h in {opt.region} is 1/{usual / spot:.0f} of "
                    f"{opt.provider}'s usual on-demand {opt.gpu} level (${usual:.3g}/GPU-h); spot prices move and "
                    "capacity may be gone - check it before planning on it"
                )
            elif on_demand is not None and spot > on_demand:
                out.append(
                    f"implausible price: {where} spot ${spot:.3g}/GPU-h in {opt.region} is above its on-demand "
                    f"${on_demand:.3g}/GPU-h"
                )
        elif opt.pricing == "on_demand":
            price = _per_gpu(offer.price_hour, offer)
            if price is None:
                continue
            ratio = price / usual
            if ratio > FAR_FACTOR or ratio < 1 / FAR_LOW_FACTOR:
                out.append(
                    f"implausible price: {where} ${price:.3g}/GPU-h in {opt.region} is {ratio:.2g}x "
                    f"{opt.provider}'s usual {opt.gpu} level (${usual:.3g}/GPU-h, median of its offers)"
                )
    return out


# Prices older than this are not planned on by default (the answer names the limit): a catalog
# three years old predates the GPU's current market (the A100's list prices fell by half from 2023 to 2025).
MAX_PRICE_AGE_DAYS = 3 * 365.0
SUSPECT_FAR = (
    f"suspect price: on-demand under 1/{FAR_LOW_FACTOR:g} of its provider's usual level for the GPU "
    "(median of its offers); set allow_suspect_prices to use it"
)
SUSPECT_SPOT = (
    f"suspect price: spot under {SPOT_FLOOR:.0%} of its provider's usual on-demand level for the GPU; "
    "set allow_suspect_prices to use it"
)
SUSPECT_OLD = (
    f"suspect price: older than {MAX_PRICE_AGE_DAYS / 365:g} years; refresh prices or set allow_suspect_prices to use it"
)


@dataclass(frozen=True, slots=True)
class PriceScreen:
    """Which prices an answer does not plan on unless asked: far from the provider's usual level
    for the GPU (the thresholds of ``implausible_warnings``), or older than ``max_age_days``."""

    levels: Mapping[tuple[str, str], float]
    now: datetime
    max_age_days: float = MAX_PRICE_AGE_DAYS
    oldest_ok: datetime = field(init=False)
    # id(offer) -> (offer, reasons): a screen is reused for its catalog (``price_screen``), so each
    # offer is judged once, not on every quote. The offer is kept to make the id safe.
    _seen: dict[int, tuple[Offer, tuple[str | None, str | None]]] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "oldest_ok", self.now - timedelta(days=self.max_age_days))
        object.__setattr__(self, "_seen", {})

    def reasons(self, o: Offer) -> tuple[str | None, str | None]:
        """(why the on-demand price is suspect, why the spot price is), None where it is not."""
        hit = self._seen.get(id(o))
        if hit is not None and hit[0] is o:
            return hit[1]
        out = self._reasons(o)
        if len(self._seen) < 1_000_000:
            self._seen[id(o)] = (o, out)
        return out

    def _reasons(self, o: Offer) -> tuple[str | None, str | None]:
        if o.as_of is not None and o.as_of < self.oldest_ok:
            return SUSPECT_OLD, SUSPECT_OLD
        usual = self.levels.get((o.provider, o.gpu))
        if usual is None or usual <= 0:
            return None, None
        od = sp = None
        if o.price_hour:
            # Only the cheap side: a dear price never wins by being wrong, and host-heavy instances
            # (many vCPUs per GPU, what image jobs need) are dear per GPU for real.
            if o.price_hour / o.gpu_count / usual < 1 / FAR_LOW_FACTOR:
                od = SUSPECT_FAR
        if o.spot_price_hour and o.spot_price_hour / o.gpu_count < SPOT_FLOOR * usual:
            sp = SUSPECT_SPOT
        return od, sp


# The screens of the last few catalogs, each kept for a day: (catalog, day, limit) -> screen.
_SCREENS: dict[int, tuple[object, str, float, PriceScreen]] = {}
_SCREENS_KEPT = 8
_SCREENS_LOCK = threading.Lock()


def price_screen(catalog: Iterable[Offer], now: datetime, max_age_days: float = MAX_PRICE_AGE_DAYS) -> PriceScreen:
    """A screen whose usual levels come from ``catalog`` (every offer of the snapshot); the same
    catalog object on the same day gets the same screen back, with what it already judged."""
    day = now.date().isoformat()
    with _SCREENS_LOCK:
        hit = _SCREENS.get(id(catalog))
    if hit is not None and hit[0] is catalog and hit[1] == day and hit[2] == max_age_days:
        return hit[3]
    screen = _new_screen(catalog, now, max_age_days)
    with _SCREENS_LOCK:
        if len(_SCREENS) >= _SCREENS_KEPT:
            _SCREENS.pop(next(iter(_SCREENS)))
        _SCREENS[id(catalog)] = (catalog, day, max_age_days, screen)
    return screen


def _new_screen(catalog: Iterable[Offer], now: datetime, max_age_days: float) -> PriceScreen:
    memo = getattr(catalog, "usual_levels_memo", None)
    if memo is not None:
        usual_levels(catalog, set())  # fills the snapshot's memo once
        return PriceScreen(memo, now, max_age_days)
    offers = list(catalog)
    return PriceScreen(usual_levels(offers, {(o.provider, o.gpu) for o in offers}), now, max_age_days)


def age_days(as_of: datetime | None, now: datetime) -> float | None:
    return None if as_of is None else round((now - as_of).total_seconds() / 86400, 1)


def currency_notes(options: Sequence[Option], offers: Sequence[Offer]) -> list[str]:
    """For options priced in another currency: the dated rate the price was converted at."""
    wanted = {(o.provider, o.region or "", o.instance_type) for o in options if o.kind == "cloud"}
    out: list[str] = []
    for _, off in _offers_of_types(offers, wanted):
        if off.currency != "USD":
            note = _FX_NOTE.search(off.source)
            if note:
                text = f"converted price: {off.provider}/{off.instance_type} is priced in {off.currency}; {note.group(0)}"
                if text not in out:
                    out.append(text)
    return out


def price_warnings(
    options: Sequence[Option],
    offers: Sequence[Offer],
    prices_as_of: Mapping[str, datetime],
    *,
    now: datetime,
    stale_after_days: float = DEFAULT_STALE_AFTER_DAYS,
    reference: Sequence[Offer] | None = None,
) -> list[str]:
    """Stale, implausible and converted prices among ``options`` (best first, then the rest).

    ``offers`` must hold the options' rows; ``reference`` (default ``offers``) is the catalog whose
    medians say what is usual."""
    providers = [o.provider for o in options]
    if any(o.kind == "local" for o in options):
        providers.append("local")
    return (
        stale_warnings(providers, prices_as_of, now=now, stale_after_days=stale_after_days)
        + implausible_warnings(options, offers, reference)
        + currency_notes(options, offers)
    )
