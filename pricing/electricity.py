"""Electricity prices by region, from the bundled table (``electricity.csv``: EIA and Chinese
tariffs, each dated and sourced), for the running cost of owned machines."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from optimizer.errors import InvalidInput

if TYPE_CHECKING:
    from pricing.adapters.local import Electricity

# The table is imported where it is read: importing ``pricing.adapters`` loads every price
# adapter, which a quote without an electricity region does not need.


def electricity_regions() -> dict[str, Electricity]:
    from pricing.adapters.local import bundled_electricity

    return dict(bundled_electricity())


def electricity_for(region: str, field: str = "electricity_region") -> Electricity:
    """The bundled price of ``region`` (case-insensitive); unknown regions raise ``InvalidInput``."""
    from pricing.adapters.local import bundled_electricity

    table = bundled_electricity()
    key = region.strip().lower()
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise InvalidInput(field, f"unknown region {region!r} (known: {', '.join(sorted(table))}){hint}")


def resolve_usd_per_kwh(usd_per_kwh: float | None, region: str | None, field: str = "electricity_region") -> float | None:
    """An explicit price wins; else the region's price; else None (each build's own figure)."""
    if usd_per_kwh is not None or not region:
        return usd_per_kwh
    return electricity_for(region, field).usd_per_kwh
