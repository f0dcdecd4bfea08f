"""Checks a fetched price list must pass before it may replace the provider's current one.

Rules, each named in the error so a failed refresh says which one broke and shows examples:

- ``schema``: every row is an ``Offer`` (a ``LocalBuild`` for ``local``) of this provider, with a
  canonical GPU name (for GPUs we know) and a timezone-aware ``as_of`` not in the future.
- ``price_positive``: an offer has an on-demand or a spot price, and every price given is > 0.
- ``price_bounds``: the price per GPU-hour lies within sane bounds. They are wide on purpose:
  they catch unit slips (per-second or per-month figures, cents, CNY read as USD), not deals.
- ``duplicate_keys``: one row per (provider, region, zone, instance type), one per build id.
- ``empty``: a list with no rows at all (refused even with ``force``).
- ``row_collapse``: fewer than half the rows of the provider's recent peak (its largest recent
  snapshot, see ``pricing.store.writes``), the usual sign of a truncated page or a half-failed
  pagination. ``force`` lets a deliberate shrink through.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from optimizer.errors import ProviderError
from optimizer.estimator.gpus import find_gpu
from optimizer.offer import LocalBuild, Offer

# USD per GPU-hour. Across the SkyPilot catalog (v6-v8) per-GPU on-demand prices run from about
# $0.09 (vast RTX 3060 median) to $17.80 (aws p-family); these bounds sit an order of magnitude
# outside that range on either side.
MIN_USD_PER_GPU_HOUR = 0.005
MAX_USD_PER_GPU_HOUR = 150.0
# USD per GPU for a whole machine: a used entry card up to a fully built datacenter node.
MIN_BUILD_USD_PER_GPU = 50.0
MAX_BUILD_USD_PER_GPU = 150_000.0
COLLAPSE_FRACTION = 0.5
FUTURE_SLACK = timedelta(days=1)
MAX_EXAMPLES = 5

Row = Offer | LocalBuild


class ValidationFailed(ProviderError):
    """A fetched price list broke a rule; the provider's current rows stay as they are."""

    def __init__(self, provider: str, rule: str, detail: str, examples: Sequence[str] = ()) -> None:
        self.rule = rule
        self.detail = detail
        self.examples = list(examples)[:MAX_EXAMPLES]
        shown = f" (e.g. {'; '.join(self.examples)})" if self.examples else ""
        super().__init__(provider, f"validation rule {rule!r} failed: {detail}{shown}", retriable=False)


def _label(row: Row) -> str:
    if isinstance(row, LocalBuild):
        return f"build {row.id}"
    zone = f"/{row.zone}" if row.zone else ""
    return f"{row.region}{zone}/{row.instance_type}"


def _check_schema(provider: str, rows: Sequence[object], now: datetime) -> None:
    want = LocalBuild if provider == "local" else Offer
    wrong_type = [f"row {i}: {type(r).__name__}" for i, r in enumerate(rows) if not isinstance(r, want)]
    if wrong_type:
        raise ValidationFailed(provider, "schema", f"rows must be {want.__name__}", wrong_type)
    typed: Sequence[Row] = rows  # type: ignore[assignment]
    other = [
        f"{_label(r)} has provider {r.provider!r}"
        for r in typed
        if isinstance(r, Offer) and r.provider != provider
    ]
    if other:
        raise ValidationFailed(provider, "schema", f"rows of another provider than {provider!r}", other)
    # A GPU we have no specs for may stay under its own name; a known one must use its canonical
    # name, or filters by GPU would miss it.
    aliases = sorted({f"{r.gpu} (canonical: {c})" for r in typed if (c := find_gpu(r.gpu)) and c != r.gpu})
    if aliases:
        raise ValidationFailed(provider, "schema", "GPU names must be canonical", aliases)
    naive = [_label(r) for r in typed if r.as_of.tzinfo is None]
    if naive:
        raise ValidationFailed(provider, "schema", "as_of must be timezone-aware", naive)
    future = [f"{_label(r)} as_of {r.as_of.isoformat()}" for r in typed if r.as_of > now + FUTURE_SLACK]
    if future:
        raise ValidationFailed(provider, "schema", "as_of lies in the future", future)


def _check_prices(provider: str, rows: Sequence[Row]) -> None:
    missing: list[str] = []
    negative: list[str] = []
    out_of_bounds: list[str] = []
    for row in rows:
        if isinstance(row, LocalBuild):
            if row.price_usd <= 0:
                negative.append(f"{_label(row)}: {row.price_usd}")
            elif not MIN_BUILD_USD_PER_GPU <= row.price_usd / row.gpu_count <= MAX_BUILD_USD_PER_GPU:
                out_of_bounds.append(f"{_label(row)}: ${row.price_usd / row.gpu_count:,.0f} per GPU")
            continue
        prices = [p for p in (row.price_hour, row.spot_price_hour) if p is not None]
        if not prices:
            missing.append(_label(row))
            continue
        if any(p <= 0 for p in prices):
            negative.append(f"{_label(row)}: {prices}")
            continue
        for p in prices:
            per_gpu = p / row.gpu_count
            if not MIN_USD_PER_GPU_HOUR <= per_gpu <= MAX_USD_PER_GPU_HOUR:
                out_of_bounds.append(f"{_label(row)}: ${per_gpu:.4f}/GPU-h")
                break
    if missing:
        raise ValidationFailed(provider, "price_positive", "offer without any price", missing)
    if negative:
        raise ValidationFailed(provider, "price_positive", "prices must be > 0", negative)
    if out_of_bounds:
        bounds = (
            f"${MIN_BUILD_USD_PER_GPU:,.0f}..${MAX_BUILD_USD_PER_GPU:,.0f} per GPU"
            if provider == "local"
            else f"${MIN_USD_PER_GPU_HOUR}..${MAX_USD_PER_GPU_HOUR} per GPU-hour"
        )
        raise ValidationFailed(
            provider, "price_bounds", f"{len(out_of_bounds)} rows outside {bounds}", out_of_bounds
        )


def _check_duplicates(provider: str, rows: Sequence[Row]) -> None:
    keys = Counter(r.id if isinstance(r, LocalBuild) else r.key for r in rows)
    dupes = [str(k) for k, n in keys.items() if n > 1]
    if dupes:
        raise ValidationFailed(provider, "duplicate_keys", f"{len(dupes)} keys occur more than once", dupes)


def validate_rows(
    provider: str,
    rows: Sequence[Row],
    *,
    previous_rows: int | None = None,
    force: bool = False,
    now: datetime | None = None,
) -> None:
    """Raise ``ValidationFailed`` naming the first rule ``rows`` break; return if all pass.

    ``previous_rows`` is the row count the list is measured against: the provider's recent peak.
    """
    now = now or datetime.now(UTC)
    if not rows:
        # Not even ``force`` empties a provider: no rows is an outage, never a price list.
        raise ValidationFailed(provider, "empty", "the source returned no rows")
    _check_schema(provider, rows, now)
    _check_prices(provider, rows)
    _check_duplicates(provider, rows)
    if previous_rows and not force and len(rows) < COLLAPSE_FRACTION * previous_rows:
        raise ValidationFailed(
            provider,
            "row_collapse",
            f"{len(rows)} rows against {previous_rows} in the provider's recent snapshots "
            f"(more than {1 - COLLAPSE_FRACTION:.0%} fewer); use force for this provider to accept",
        )


def price_outliers(offers: Sequence[Offer], factor: float = 2.0, min_peers: int = 3) -> list[tuple[Offer, float]]:
    """Offers whose on-demand price per GPU-hour is more than ``factor`` away from the median of the
    same provider's offers for that GPU (a stale or misparsed region, such as one cloud region at
    half the price of all the others). Flagged for a person to look at, not dropped: a price can be
    far from the median and still be right. Providers are not compared with each other: a
    marketplace and a hyperscaler differ by more than 2x as a matter of course.

    Returns (offer, price / median) pairs, most extreme first; groups with fewer than ``min_peers``
    priced offers are not judged.
    """
    groups: dict[tuple[str, str], list[float]] = {}
    for o in offers:
        if o.price_hour is not None:
            groups.setdefault((o.provider, o.gpu), []).append(o.price_hour / o.gpu_count)
    medians = {key: statistics.median(prices) for key, prices in groups.items() if len(prices) >= min_peers}
    flagged = []
    for o in offers:
        median = medians.get((o.provider, o.gpu))
        if o.price_hour is None or not median:
            continue
        ratio = (o.price_hour / o.gpu_count) / median
        if ratio > factor or ratio < 1.0 / factor:
            flagged.append((o, ratio))
    return sorted(flagged, key=lambda pair: -max(pair[1], 1.0 / pair[1]))
