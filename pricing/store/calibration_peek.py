"""The learnt calibration read with sqlite3 alone: the CLI's quick quote path (a prepared reader)
answers without loading SQLAlchemy, and so must this read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from optimizer.bill_calibration import FORMULA
from optimizer.runs import CalibrationFactor
from pricing.store.peek import read_only_rows

# Plain SQL that SQLite and PostgreSQL both run as written: the sqlite3 path and the store's
# engine (``pricing.store.runs.calibration``) read the same rows.
CALIBRATION_SQL = "SELECT provider, gpu, hours_factor, rate_factor, runs FROM bill_calibration ORDER BY provider, gpu"


def factors_from(rows: Iterable[Sequence[Any]]) -> list[CalibrationFactor]:
    """Factors from ``CALIBRATION_SQL``'s rows (``runs``: JSON text from SQLite, a list from
    PostgreSQL's driver)."""
    return [
        CalibrationFactor(provider=p, gpu=g, hours_factor=h, rate_factor=r, formula=FORMULA,
                          runs=list(json.loads(runs) if isinstance(runs, str) else runs or []))
        for p, g, h, r, runs in rows
    ]


def calibration_from_file(path: Path) -> list[CalibrationFactor]:
    return factors_from(read_only_rows(path, CALIBRATION_SQL))  # none before migration 0005
