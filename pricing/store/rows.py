"""How offers and builds are stored: the tables, the row for each, and the hash of a price list."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from optimizer.offer import LocalBuild, Offer
from pricing.store.schema import (
    LeaseRow,
    LocalBuildRow,
    OfferRow,
    ProviderStatusRow,
    RefreshRunRow,
    SnapshotRow,
    StoreMetaRow,
)

LOCAL = "local"

_snap = SnapshotRow.__table__
_offers = OfferRow.__table__
_builds = LocalBuildRow.__table__
_status = ProviderStatusRow.__table__
_leases = LeaseRow.__table__
_meta = StoreMetaRow.__table__
_runs = RefreshRunRow.__table__

_OFFER_FIELDS = [name for name in Offer.model_fields if name in _offers.c]


def content_hash(rows: Sequence[Offer | LocalBuild]) -> str:
    """A hash of the rows' content, independent of their order."""
    dumps = sorted(json.dumps(r.model_dump(mode="json"), sort_keys=True) for r in rows)
    digest = hashlib.sha256()
    for d in dumps:
        digest.update(d.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _build_row(snapshot_id: int, build: LocalBuild) -> dict[str, Any]:
    data = build.model_dump(mode="json")
    parts = data.pop("parts")
    return {
        "snapshot_id": snapshot_id,
        "build_id": build.id,
        "gpu": build.gpu,
        "gpu_count": build.gpu_count,
        "price_usd": build.price_usd,
        "source": build.source,
        "as_of": build.as_of,
        "attrs": data,
        "parts": parts,
    }


def _offer_row(snapshot_id: int, offer: Offer) -> dict[str, Any]:
    row = {name: getattr(offer, name) for name in _OFFER_FIELDS}
    if "commitments" in row:
        # Most offers have none: NULL keeps their rows as small as before the column existed.
        row["commitments"] = [c.model_dump(mode="json") for c in offer.commitments] or None
    row["snapshot_id"] = snapshot_id
    return row
