"""The learnt calibration read with sqlite3 alone: the CLI's quick quote path (a prepared reader)
answers without loading SQLAlchemy, and so must this read."""

from __future__ import annotations

import json
from pathlib import Path

from optimizer.bill_calibration import FORMULA
from optimizer.runs import CalibrationFactor
from pricing.store.peek import read_only_rows


def calibration_from_file(path: Path) -> list[CalibrationFactor]:
    rows = read_only_rows(  # none before migration 0005: nothing learnt yet
        path, "SELECT provider, gpu, hours_factor, rate_factor, runs FROM bill_calibration ORDER BY provider, gpu")
    return [
        CalibrationFactor(provider=p, gpu=g, hours_factor=h, rate_factor=r, formula=FORMULA,
                          runs=list(json.loads(runs) if isinstance(runs, str) else runs or []))
        for p, g, h, r, runs in rows
    ]
