"""Bill files in, ``BillLine`` rows out: FOCUS 1.0-1.2, AWS CUR 2.0 and the GCP billing export.

``read_bill(data, fmt)`` reads the whole file or raises ``BillFileError`` naming the column: a
file is taken whole or not at all, so nothing half-read is ever stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from optimizer.runs import BillLine
from pricing.billing.table import MAX_BILL_BYTES, BillFileError, load_table

BillFormat = Literal["focus", "cur2", "gcp-billing"]
FORMATS: tuple[str, ...] = ("focus", "cur2", "gcp-billing")


@dataclass(frozen=True)
class BillFile:
    format: str
    lines: list[BillLine]


def detect_format(columns: set[str]) -> str:
    if "BilledCost" in columns:
        return "focus"
    if "line_item_unblended_cost" in columns or "lineItem/UnblendedCost" in columns:
        return "cur2"
    if "cost" in columns and ("usage_start_time" in columns):
        return "gcp-billing"
    raise BillFileError("format", "cannot tell the bill's format from its columns: give --format focus|cur2|gcp-billing")


def _pick(fmt: str | None, chosen: list[str]) -> Callable[[list[str]], list[str]]:
    """The columns the bill's reader uses, its format told from the header when not given."""

    def pick(header: list[str]) -> list[str]:
        name = fmt or detect_format(set(header))
        chosen.append(name)
        if name == "focus":
            from pricing.billing.focus import COLUMNS

            return [c for c in header if c in COLUMNS]
        if name == "cur2":
            from pricing.billing.cur2 import pick as cur2_pick

            return cur2_pick(header)
        if name == "gcp-billing":
            from pricing.billing.gcp import COLUMNS as GCP

            return [c for c in header if c.replace(".", "_") in GCP]
        raise BillFileError("format", f"unknown format {name!r}: one of {', '.join(FORMATS)}")

    return pick


def read_bill(data: bytes, fmt: str | None = None, *, rates: Mapping[str, float] | None = None) -> BillFile:
    chosen: list[str] = []
    rows = load_table(data, _pick(fmt, chosen))
    if not rows:
        raise BillFileError("file", "the bill has a header but no rows")
    fmt = chosen[0]
    if fmt == "focus":
        from pricing.billing.focus import read_focus

        return BillFile(fmt, read_focus(rows, rates))
    if fmt == "cur2":
        from pricing.billing.cur2 import read_cur2

        return BillFile(fmt, read_cur2(rows, rates))
    from pricing.billing.gcp import read_gcp

    return BillFile(fmt, read_gcp(rows, rates))


__all__ = ["FORMATS", "MAX_BILL_BYTES", "BillFile", "BillFileError", "read_bill"]
