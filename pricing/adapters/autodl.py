"""AutoDL-style per-GPU-hour rentals, read from versioned snapshot files.

AutoDL and similar Chinese platforms publish prices only inside their consoles, so prices come
as dated files (``autodl-YYYY-MM.csv``) that a person refreshes; the newest file wins. Each row
is a price per GPU-hour in the source's currency, with its own ``as_of``, source and confidence.

Rules:
- A price like ``2.5-3.5`` is a range quoted by a user guide: the offer takes the midpoint and
  says so in its ``source``.
- ``max_gpus`` > 1 (a machine rented with several cards) yields one offer per count 1..max_gpus,
  priced per card times the count.
- No public page states the billing granularity, so an empty ``billing_increment_s`` means
  1 s, marked "assumed" in the source.
- Staleness is the store's business, computed from ``as_of``.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import ClassVar

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import canonical_gpu, gpu_spec
from optimizer.offer import Offer
from pricing.currency import fx_rate
from pricing.errors import ProviderError
from pricing.source import RawSnapshot, SourceSettings, register

_FILE_RE = re.compile(r"^autodl-(\d{4})-(\d{2})\.csv$")
_RANGE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*[-–~]\s*(\d+(?:\.\d+)?)\s*$")


# No GPU rents for a million an hour in any currency: a larger cell is a typo or hostile, and "inf"
# (which ``float`` reads) or 1e308 times a listing's cards would price offers at infinity.
MAX_PRICE_PER_GPU_HOUR = 1e6


def parse_price(text: str) -> tuple[float, bool]:
    """A price cell as (value, was_range): "2.18" -> (2.18, False); "2.5-3.5" -> (3.0, True)."""
    m = _RANGE_RE.match(text)
    if m:
        low, high = float(m.group(1)), float(m.group(2))
        if low <= 0 or high < low or high > MAX_PRICE_PER_GPU_HOUR:
            raise InvalidInput("price_per_gpu_hour", f"bad range {text!r}")
        return (low + high) / 2, True
    try:
        value = float(text)
    except ValueError as exc:
        raise InvalidInput("price_per_gpu_hour", f"not a price: {text!r}") from exc
    if not value > 0:  # also NaN
        raise InvalidInput("price_per_gpu_hour", f"price must be > 0: {text!r}")
    if not value <= MAX_PRICE_PER_GPU_HOUR:
        raise InvalidInput("price_per_gpu_hour", f"price must be at most {MAX_PRICE_PER_GPU_HOUR:.0e}: {text!r}")
    return value, False


def _version(name: str) -> tuple[int, int] | None:
    m = _FILE_RE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def newest_snapshot(folder: Traversable | Path) -> Traversable | Path:
    files = [f for f in folder.iterdir() if f.is_file() and _version(f.name)]
    if not files:
        raise ProviderError("autodl", f"no autodl-YYYY-MM.csv file in {folder}")
    return max(files, key=lambda f: _version(f.name) or (0, 0))


def bundled_folder() -> Traversable:
    return resources.files("pricing.snapshot").joinpath("data/autodl")


# A card's listing multiplies into one offer per GPU count; no AutoDL machine has more.
MAX_GPUS_PER_LISTING = 64


def offers_from_csv(text: str, file_name: str) -> list[Offer]:
    """Pure: one snapshot file's text -> offers (USD at the bundled rate of each price's date).

    A malformed file is an ``InvalidInput`` naming it, whatever the cell that broke."""
    try:
        return _offers_from_csv(text, file_name)
    except InvalidInput:
        raise
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise InvalidInput("autodl", f"{file_name}: unreadable row ({type(exc).__name__}: {exc})") from None


def _offers_from_csv(text: str, file_name: str) -> list[Offer]:
    offers: list[Offer] = []
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        where = f"{file_name} line {line}"
        gpu = canonical_gpu(row["gpu"])
        per_gpu, was_range = parse_price(row["price_per_gpu_hour"])
        currency = row["currency"].strip().upper()
        as_of = datetime.fromisoformat(row["as_of"].strip()).replace(tzinfo=UTC)
        # The rate of the price's own date, not the newest one.
        rate = fx_rate(currency, on=as_of.date())
        increment = row.get("billing_increment_s", "").strip()
        max_gpus = int(row.get("max_gpus") or 1)
        notes = [f"{file_name}: {row['product']} {row['price_per_gpu_hour']} {currency}/GPU-h"]
        if was_range:
            notes.append("range quoted by the source, midpoint taken")
        notes.append(f"confidence {row['confidence']}")
        notes.append(row["source"])
        if currency != "USD":
            notes.append(f"{rate.note()}: {rate.source}")
        if not increment:
            notes.append("billing increment assumed 1 s (not stated in a public source)")
        if not 1 <= max_gpus <= MAX_GPUS_PER_LISTING:
            raise InvalidInput("max_gpus", f"{where}: must be 1 to {MAX_GPUS_PER_LISTING}")
        for count in range(1, max_gpus + 1):
            native = round(per_gpu * count, 6)
            offers.append(
                Offer(
                    provider=row["provider"].strip().lower(),
                    region="cn",
                    instance_type=f"{row['provider'].strip().lower()}-{gpu.lower()}-{count}x",
                    gpu=gpu,
                    gpu_count=count,
                    gpu_vram_gb=gpu_spec(gpu).vram_gb,
                    price_hour=round(rate.to_usd(native), 6),
                    currency=currency,
                    price_hour_native=native,
                    billing_increment_s=int(increment) if increment else 1,
                    min_billing_s=0,
                    interconnect=None if count == 1 else "pcie",
                    source="; ".join(notes),
                    as_of=as_of,
                )
            )
    return offers


@register
class AutodlSource:
    name: ClassVar[str] = "autodl"

    def __init__(self, folder: Traversable | Path) -> None:
        self.folder = folder

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> AutodlSource:
        # No credentials: the files are public figures a person curates.
        folder: Traversable | Path = Path(settings.autodl_dir) if settings.autodl_dir else bundled_folder()
        return cls(folder)

    def fetch(self) -> RawSnapshot:
        try:
            newest = newest_snapshot(self.folder)
            text = newest.read_text(encoding="utf-8")
        except OSError as exc:
            raise ProviderError("autodl", f"cannot read snapshot files: {exc}", retriable=False) from exc
        return RawSnapshot(
            provider=self.name,
            fetched_at=datetime.now(UTC),
            payloads={"file": newest.name, "text": text},
        )

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return offers_from_csv(raw.payloads["text"], raw.payloads["file"])
