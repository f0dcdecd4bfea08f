"""Build the bundled catalog offers from a SkyPilot catalog folder.

Every GPU row of every cloud in the catalog becomes an offer (every size, region, zone and spot
price), through the same importer as ``gpucost prices import --format skypilot``, so the bundled
default and an import of the same files cannot disagree. Each cloud's rows are dated and sourced
by the catalog version and commit they were read at.

Writes ``pricing/snapshot/data/catalog_offers.csv.gz`` (gzip with a fixed mtime, so the same
catalog gives the same bytes and the same snapshot id). The hand-curated rows (Alibaba, Colab)
live in ``curated_offers.csv`` beside it; AutoDL-style rows in ``autodl/``; local builds in
``parts.csv`` and ``builds.yaml``.

    .venv/bin/python scripts/build_snapshot.py [CATALOG_DIR]
    .venv/bin/python scripts/build_snapshot.py --commitments SUMMARY_CSV

The second form writes ``commitments.csv.gz`` (reserved terms, capacity blocks) from the dated
reference table ``shared/reference/commitments/commitments_summary.csv``, each row with its source.

CATALOG_DIR defaults to ``tests/data/reference/skypilot-catalog`` (a copy of the public catalog).
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pricing.adapters.skypilot_csv import ImportReport, catalog_files, parse_vms_csv  # noqa: E402
from pricing.snapshot.commitments import COMMITMENTS_FILE, rows_from_reference_csv, write_csv  # noqa: E402
from pricing.snapshot.loader import SNAPSHOT_COLUMNS, offer_to_row  # noqa: E402

OUT = ROOT / "pricing" / "snapshot" / "data" / "catalog_offers.csv.gz"
COMMITMENTS_OUT = ROOT / "pricing" / "snapshot" / "data" / COMMITMENTS_FILE

# Catalog version and commit each file was read at (github.com/skypilot-org/skypilot-catalog),
# and its date. The repository's history could not be read, so dates are judged by content:
# v8 prices p5.48xlarge at 55.04 (after AWS's June 2025 H100 cut) and lists p6-b300 (late 2025);
# v7 RunPod predates it; v6 Azure/Paperspace are older still (2024 by their price levels).
CATALOG_META: dict[str, tuple[str, str, datetime]] = {
    "aws": ("v8", "00148f2a", datetime(2025, 11, 30, tzinfo=UTC)),
    "gcp": ("v8", "006059e0", datetime(2025, 11, 30, tzinfo=UTC)),
    "lambda": ("v8", "0f407038", datetime(2025, 11, 30, tzinfo=UTC)),
    "nebius": ("v8", "0082b043", datetime(2025, 11, 30, tzinfo=UTC)),
    "vast": ("v8", "01b8cdda", datetime(2025, 11, 30, tzinfo=UTC)),
    "runpod": ("v7", "0727c2bd", datetime(2025, 6, 30, tzinfo=UTC)),
    "azure": ("v6", "098741e7", datetime(2024, 6, 30, tzinfo=UTC)),
    "paperspace": ("v6", "e5200541", datetime(2024, 6, 30, tzinfo=UTC)),
}


def source_label(cloud: str) -> str:
    version, commit, as_of = CATALOG_META[cloud]
    return (
        f"skypilot-catalog:{cloud}/vms.csv (catalog {version}, commit {commit}; "
        f"as_of {as_of.date().isoformat()} judged by content, approximate)"
    )


def build(catalog: Path) -> tuple[bytes, Counter[str], ImportReport]:
    report = ImportReport()
    rows = []
    for cloud, path in catalog_files(catalog).items():
        if cloud not in CATALOG_META:
            raise SystemExit(f"{cloud}: no version/commit/date recorded in CATALOG_META")
        as_of = CATALOG_META[cloud][2]
        text = path.read_text(encoding="utf-8")
        rows.extend(parse_vms_csv(cloud, text, source_label(cloud), as_of, report))
    rows.sort(key=lambda o: (o.provider, o.region, o.zone or "", o.instance_type))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=SNAPSHOT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for offer in rows:
        writer.writerow(offer_to_row(offer))
    data = gzip.compress(buf.getvalue().encode("utf-8"), compresslevel=9, mtime=0)
    return data, Counter(o.provider for o in rows), report


def build_commitments(summary: Path) -> tuple[bytes, int]:
    rows = rows_from_reference_csv(summary.read_text(encoding="utf-8"))
    data = gzip.compress(write_csv(rows).encode("utf-8"), compresslevel=9, mtime=0)
    return data, len(rows)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--commitments":
        data, n = build_commitments(Path(sys.argv[2]))
        COMMITMENTS_OUT.write_bytes(data)
        print(f"wrote {COMMITMENTS_OUT.relative_to(ROOT)}: {n} commitment rows, {len(data)} bytes")
        return
    catalog = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "reference" / "skypilot-catalog"
    data, counts, report = build(catalog)
    OUT.write_bytes(data)
    print(f"wrote {OUT.relative_to(ROOT)}: {sum(counts.values())} offers, {len(data)} bytes")
    for cloud, rep in sorted(report.clouds.items()):
        print(f"  {cloud}: {rep.rows} rows -> {rep.offers} offers; skipped {dict(rep.skipped)}; fixed {dict(rep.fixed)}")


if __name__ == "__main__":
    main()
