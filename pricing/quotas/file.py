"""``GPUCOST_QUOTAS``: the user's own limits, a YAML or CSV file of ``provider, region, code, limit``
rows (AWS codes count vCPUs, GCP metrics count GPUs), laid over the fetched ones.

YAML: a list of rows, or ``{"quotas": [rows]}``. CSV: a header naming those four columns. A file
that cannot be read or holds a bad row is an error naming the file and the row.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from optimizer.errors import InvalidInput
from optimizer.quotas import QuotaLimit

FIELD = "GPUCOST_QUOTAS"
MAX_BYTES = 1_000_000
MAX_ROWS = 10_000
_cache: dict[tuple[str, int, int], list[QuotaLimit]] = {}


def _row(path: str, where: str, cells: Any) -> QuotaLimit:
    if not isinstance(cells, dict):
        raise InvalidInput(FIELD, f"{path}: {where}: a row is a mapping of provider, region, code, limit")
    missing = [k for k in ("provider", "region", "code", "limit") if cells.get(k) in (None, "")]
    if missing:
        raise InvalidInput(FIELD, f"{path}: {where}: missing {', '.join(missing)}")
    try:
        limit = float(cells["limit"])
    except (TypeError, ValueError):
        raise InvalidInput(FIELD, f"{path}: {where}: limit {cells['limit']!r} is not a number") from None
    if not math.isfinite(limit) or limit < 0:
        raise InvalidInput(FIELD, f"{path}: {where}: limit must be a number >= 0")
    texts = {k: str(cells[k]).strip() for k in ("provider", "region", "code")}
    if any(len(v) > 128 or not v for v in texts.values()):
        raise InvalidInput(FIELD, f"{path}: {where}: provider, region and code are 1 to 128 characters")
    return QuotaLimit(texts["provider"].lower(), texts["region"], texts["code"], limit, source=f"file:{path}")


def parse_quota_text(text: str, path: str) -> list[QuotaLimit]:
    """Rows of a quota file (``path`` only names it in errors and sources)."""
    if path.lower().endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text))
        rows: list[Any] = []
        for row in reader:
            rows.append({(k or "").strip().lower(): (v or "").strip() for k, v in row.items()})
            if len(rows) > MAX_ROWS:
                break
        first_line = 2
    else:
        import yaml  # only quota files in YAML need it; a quote without one never imports it

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInput(FIELD, f"{path}: not YAML: {exc}") from None
        if isinstance(doc, dict):
            doc = doc.get("quotas")
        if not isinstance(doc, list):
            raise InvalidInput(FIELD, f"{path}: expected a list of quota rows (or quotas: [...])")
        rows, first_line = doc, 1
    if len(rows) > MAX_ROWS:
        raise InvalidInput(FIELD, f"{path}: more than {MAX_ROWS} rows")
    label = "line" if first_line == 2 else "row"
    return [_row(path, f"{label} {i + first_line}", r) for i, r in enumerate(rows)]


def load_quota_file(path: str | Path) -> list[QuotaLimit]:
    """The file's limits; read again only when it changes."""
    p = str(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise InvalidInput(FIELD, f"cannot read {p}: {exc.strerror or exc}") from None
    if st.st_size > MAX_BYTES:
        raise InvalidInput(FIELD, f"{p}: larger than {MAX_BYTES} bytes")
    key = (p, st.st_mtime_ns, st.st_size)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    try:
        text = Path(p).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(FIELD, f"cannot read {p}: {exc}") from None
    limits = parse_quota_text(text, p)
    _cache.clear()
    _cache[key] = limits
    return limits
