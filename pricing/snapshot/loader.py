"""Load the bundled snapshot with ``importlib.resources`` (works from an installed wheel).

- ``catalog_offers.csv.gz``: every GPU row of the public SkyPilot catalog (AWS, GCP, Azure, Lambda,
  RunPod, Vast, Nebius, Paperspace: every size, region, zone and spot price), written by
  ``scripts/build_snapshot.py`` through the same importer as ``prices import --format skypilot``;
- ``curated_offers.csv``: rows from other public sources, each citing it (Alibaba ECS list prices,
  Google Colab subscriptions as an effective hourly price);
- ``autodl/``: AutoDL-style Chinese rentals, the newest file;
- ``parts.csv`` + ``builds.yaml``: local builds, through the same code as their adapters;
- ``commitments.csv.gz``: reserved terms and capacity blocks joined to the AWS offers of their
  region and type (``pricing.snapshot.commitments``), each with its source and date.

Non-USD prices convert at the bundled rate of each row's own date (``pricing.currency``).
``snapshot_id`` is a content hash of the data files: re-seeding the same data is idempotent.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from optimizer.offer import LocalBuild, Offer, Part
from pricing.adapters.autodl import bundled_folder, newest_snapshot, offers_from_csv
from pricing.adapters.local import all_builds, bundled_parts
from pricing.currency import bundled_rates, convert_offers
from pricing.snapshot.commitments import COMMITMENTS_FILE, attach_commitments, commitments_from_csv

SNAPSHOT_COLUMNS = [
    "provider", "region", "zone", "instance_type", "gpu", "gpu_count", "gpu_vram_gb", "vcpus", "ram_gb",
    "price_hour", "spot_price_hour", "currency", "price_hour_native", "spot_price_hour_native",
    "billing_increment_s", "min_billing_s", "interconnect", "source", "as_of",
]
_OPTIONAL = {"zone", "vcpus", "ram_gb", "price_hour", "spot_price_hour", "price_hour_native",
             "spot_price_hour_native", "interconnect"}
CATALOG_FILE = "catalog_offers.csv.gz"
CURATED_FILE = "curated_offers.csv"


@dataclass(frozen=True)
class BundledSnapshot:
    offers: list[Offer]
    builds: list[LocalBuild]
    parts: list[Part]
    as_of: dict[str, datetime]  # per provider, "local" included: the newest row's as_of
    sources: dict[str, str]  # per provider: where its rows come from
    snapshot_id: str
    files: tuple[str, ...] = field(default=())


def _data_dir() -> Traversable:
    return resources.files("pricing.snapshot").joinpath("data")


def _data_files() -> list[Traversable]:
    data = _data_dir()
    files = [f for f in data.iterdir() if f.is_file() and f.name.endswith((".csv", ".csv.gz", ".yaml"))]
    files += [f for f in data.joinpath("autodl").iterdir() if f.is_file() and f.name.endswith(".csv")]
    return sorted(files, key=lambda f: f.name)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6)).removesuffix(".0") if value.is_integer() else repr(round(value, 6))
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def offer_to_row(offer: Offer) -> dict[str, str]:
    """One snapshot CSV row (the inverse of ``offers_from_snapshot_csv``)."""
    return {name: _cell(getattr(offer, name)) for name in SNAPSHOT_COLUMNS}


def offers_from_snapshot_csv(text: str) -> list[Offer]:
    """Pure: snapshot CSV text -> offers (empty optional cells mean unknown)."""
    offers = []
    for row in csv.DictReader(io.StringIO(text)):
        clean = {k: (None if v == "" and k in _OPTIONAL else v) for k, v in row.items()}
        offers.append(Offer.model_validate(clean))
    return offers


_SOURCES = {
    "aws": "skypilot-catalog v8 aws/vms.csv (AWS Price List): every GPU instance type, region and zone",
    "gcp": "skypilot-catalog v8 gcp/vms.csv (Cloud Billing Catalog): host + accelerator rows per zone, N1 hosts within GCP's limits",
    "azure": "skypilot-catalog v6 azure/vms.csv (Azure Retail Prices), US regions",
    "lambda": "skypilot-catalog v8 lambda/vms.csv",
    "runpod": "skypilot-catalog v7 runpod/vms.csv (SECURE)",
    "vast": "skypilot-catalog v8 vast/vms.csv (marketplace medians)",
    "nebius": "skypilot-catalog v8 nebius/vms.csv",
    "paperspace": "skypilot-catalog v6 paperspace/vms.csv",
    "alibaba": "ECS gn-series list prices: cn-shanghai CNY (ArthurChiao 2023-06, from ecs-buy.aliyun.com) and Spare Cores lowest-region USD (2026)",
    "colab": "Google Colab Pro / Pro+ compute units as an effective hourly price (McCormick 2026-03; unit rates currypurin 2022-09-30)",
    "local": "parts.csv + builds.yaml (dated street, launch and used prices), electricity.csv",
}


@lru_cache(maxsize=1)
def load_bundled() -> BundledSnapshot:
    files = _data_files()
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    data = _data_dir()
    catalog_text = gzip.decompress(data.joinpath(CATALOG_FILE).read_bytes()).decode("utf-8")
    offers = offers_from_snapshot_csv(catalog_text)
    offers += offers_from_snapshot_csv(data.joinpath(CURATED_FILE).read_text("utf-8"))
    autodl_file = newest_snapshot(bundled_folder())
    offers += offers_from_csv(autodl_file.read_text(encoding="utf-8"), autodl_file.name)
    offers = convert_offers(offers, bundled_rates())
    commitments_text = gzip.decompress(data.joinpath(COMMITMENTS_FILE).read_bytes()).decode("utf-8")
    offers = attach_commitments(offers, commitments_from_csv(commitments_text))
    parts = list(bundled_parts())
    builds = all_builds(parts, data.joinpath("builds.yaml").read_text("utf-8"))
    as_of: dict[str, datetime] = {}
    for o in offers:
        as_of[o.provider] = max(as_of.get(o.provider, o.as_of), o.as_of)
    as_of["local"] = max(b.as_of for b in builds)
    sources = {p: _SOURCES.get(p, f"AutoDL-style rentals: {autodl_file.name}") for p in as_of}
    return BundledSnapshot(
        offers=offers,
        builds=builds,
        parts=parts,
        as_of=as_of,
        sources=sources,
        snapshot_id=digest.hexdigest()[:16],
        files=tuple(f.name for f in files),
    )
