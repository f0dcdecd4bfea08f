"""Bundled commitment prices (``commitments.csv.gz``) and how they join the bundled offers.

The file is written by ``scripts/build_snapshot.py --commitments SUMMARY_CSV`` from the dated
reference table (AWS Reserved Instance terms for 42 GPU types in 7 regions, the twelve g6.xlarge
terms with their real upfront fees, and EC2 Capacity Block rates). Each row names its source and
date; an empty upfront or hourly cell means the source gave only the effective rate.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import UTC, datetime

from optimizer.offer import Commitment, Offer

COMMITMENTS_FILE = "commitments.csv.gz"
COLUMNS = [
    "provider", "region", "instance_type", "kind", "offering_class", "term_months", "payment",
    "upfront_usd", "hourly_usd", "effective_hourly_usd", "starts_at", "source", "as_of",
]

# The reference table's source keys, spelled out (shared/reference/commitments/README.md).
REFERENCE_SOURCES = {
    "vantage-2025-11-30": (
        "instances.vantage.sh (ec2instances.info) export, github.com/tsaol/aws-gpu "
        "data/gpu_instances_raw.json @2d0108c7 (2025-11-30): effective USD/h = hourly + upfront/(years*8760)"
    ),
    "flightdeck-g6-2026-10-07": (
        "AWS Price List get_products response, terms.Reserved (capture in github.com/nateabele/flight-deck "
        "@c4d8af21, 2026-10-07): upfront and hourly as AWS states them"
    ),
    "aws-capacity-blocks-page-2024": (
        "Amazon EC2 Capacity Blocks for ML pricing page (stored copy, late 2024; prices 'scheduled to be "
        "updated on January 1, 2025'): effective instance-hour rate, paid up front; OS fee extra"
    ),
}
# The capacity-block page is dated only "late 2024"; the last day the excerpt can be from.
_LATE_2024 = datetime(2024, 12, 31, tzinfo=UTC)
_PAYMENT = {"No Upfront": "no_upfront", "Partial Upfront": "partial_upfront", "All Upfront": "all_upfront"}
_TERM_MONTHS = {"1yr": 12.0, "3yr": 36.0, "capacity_block": 24 / 730}


def _as_of(text: str) -> datetime:
    if len(text) == 4:  # a year only
        return _LATE_2024 if text == "2024" else datetime(int(text), 12, 31, tzinfo=UTC)
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def rows_from_reference_csv(text: str) -> list[dict[str, str]]:
    """The reference summary table -> bundle rows; pure. Rows without an instance type name are
    dropped (not guessed); where two sources give the same term, the newer one is kept."""
    best: dict[tuple[str, ...], dict[str, str]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        itype = r["instance_type"].strip()
        if not itype or " " in itype or r["term"] not in _TERM_MONTHS or r["payment_option"] not in _PAYMENT:
            continue
        kind, _, klass = r["kind"].partition("_")
        if r["kind"] == "capacity_block":
            kind, klass = "capacity_block", ""
        as_of = _as_of(r["as_of"])
        row = {
            "provider": r["provider"], "region": r["region"], "instance_type": itype, "kind": kind,
            "offering_class": klass, "term_months": repr(round(_TERM_MONTHS[r["term"]], 6)),
            "payment": _PAYMENT[r["payment_option"]], "upfront_usd": r["upfront_usd"],
            "hourly_usd": r["hourly_usd"], "effective_hourly_usd": r["effective_hourly_usd"],
            "starts_at": "", "source": REFERENCE_SOURCES.get(r["source"], r["source"]),
            "as_of": as_of.date().isoformat(),
        }
        key = tuple(row[k] for k in ("provider", "region", "instance_type", "kind", "offering_class",
                                     "term_months", "payment"))
        if key not in best or row["as_of"] > best[key]["as_of"]:
            best[key] = row
    return sorted(best.values(), key=lambda x: tuple(x[k] for k in COLUMNS[:7]))


def write_csv(rows: Iterable[dict[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def commitments_from_csv(text: str) -> dict[tuple[str, str, str], list[Commitment]]:
    """Bundle CSV -> ``{(provider, region, instance_type): [Commitment]}``; pure."""
    out: dict[tuple[str, str, str], list[Commitment]] = {}

    def num(v: str) -> float | None:
        return float(v) if v != "" else None

    for r in csv.DictReader(io.StringIO(text)):
        c = Commitment(
            kind=r["kind"],  # type: ignore[arg-type]
            term_months=float(r["term_months"]),
            payment=r["payment"],  # type: ignore[arg-type]
            upfront_usd=num(r["upfront_usd"]),
            hourly_usd=num(r["hourly_usd"]),
            effective_hourly_usd=float(r["effective_hourly_usd"]),
            offering_class=r["offering_class"] or None,
            starts_at=datetime.fromisoformat(r["starts_at"]) if r["starts_at"] else None,
            source=r["source"],
            as_of=_as_of(r["as_of"]),
        )
        out.setdefault((r["provider"], r["region"], r["instance_type"]), []).append(c)
    return out


def attach_commitments(
    offers: list[Offer], commitments: dict[tuple[str, str, str], list[Commitment]]
) -> list[Offer]:
    """Offers with the commitments of their provider, region and type (every zone's offer)."""
    out = []
    for o in offers:
        found = commitments.get((o.provider, o.region, o.instance_type))
        out.append(o.model_copy(update={"commitments": [*o.commitments, *found]}) if found else o)
    return out
