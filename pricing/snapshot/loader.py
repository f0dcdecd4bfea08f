"""Load the bundled snapshot with ``importlib.resources`` (works from an installed wheel).

``offers.csv`` holds the curated cloud rows (AWS, GCP, Alibaba, Lambda, RunPod, Vast, Nebius),
each with its source and date; AutoDL-style rentals come from the newest file in ``autodl/`` and
local builds from ``parts.csv`` + ``builds.yaml``, through the same code as their adapters, so
the snapshot and a refresh cannot disagree. ``snapshot_id`` is a content hash of the data files:
re-seeding the same data is idempotent.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

from pricing.adapters.autodl import bundled_folder, newest_snapshot, offers_from_csv
from pricing.adapters.local import all_builds, bundled_parts
from pricing.offer import LocalBuild, Offer, Part

_OPTIONAL = {"zone", "vcpus", "ram_gb", "price_hour", "spot_price_hour", "price_hour_native",
             "spot_price_hour_native", "interconnect"}


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
    files = [f for f in data.iterdir() if f.is_file() and f.name.endswith((".csv", ".yaml"))]
    files += [f for f in data.joinpath("autodl").iterdir() if f.is_file() and f.name.endswith(".csv")]
    return sorted(files, key=lambda f: f.name)


def offers_from_snapshot_csv(text: str) -> list[Offer]:
    """Pure: offers.csv text -> offers (empty optional cells mean unknown)."""
    offers = []
    for row in csv.DictReader(io.StringIO(text)):
        clean = {k: (None if v == "" and k in _OPTIONAL else v) for k, v in row.items()}
        offers.append(Offer.model_validate(clean))
    return offers


_SOURCES = {
    "aws": "skypilot-catalog v8 aws/vms.csv (AWS Price List), curated: p3 g4dn g5 g6 g6e p4d p4de p5 in us-east-1, us-west-2, eu-west-1",
    "gcp": "skypilot-catalog v8 gcp/vms.csv (Cloud Billing Catalog), host + accelerator rows summed per zone",
    "alibaba": "ECS gn-series list prices: cn-shanghai CNY (ArthurChiao 2023-06, from ecs-buy.aliyun.com) and Spare Cores lowest-region USD (2026)",
    "lambda": "skypilot-catalog v8 lambda/vms.csv",
    "runpod": "skypilot-catalog v7 runpod/vms.csv (SECURE)",
    "vast": "skypilot-catalog v8 vast/vms.csv (marketplace medians)",
    "nebius": "skypilot-catalog v8 nebius/vms.csv",
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
    offers = offers_from_snapshot_csv(data.joinpath("offers.csv").read_text("utf-8"))
    autodl_file = newest_snapshot(bundled_folder())
    offers += offers_from_csv(autodl_file.read_text(encoding="utf-8"), autodl_file.name)
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
