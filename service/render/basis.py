"""Which figures were measured: the lines Markdown answers add when a measurement was used
(``optimizer.measured``: ``basis`` "measured" or "scaled")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def basis_line(basis: str, measurement_id: str | None) -> str:
    if basis == "measured":
        return f"speed and memory measured on this GPU (measurement `{measurement_id}`)"
    if basis == "scaled":
        return f"speed and memory scaled from measurement `{measurement_id}` on another GPU by the model's ratio"
    return "the model's figures"


def basis_section(options: Sequence[Any], where: Any) -> list[str]:
    """A "Measured" list for options whose hours come from a measurement; nothing when none do."""
    rows = [f"- #{i} {where(o)}: {basis_line(o.basis, o.measurement_id)}"
            for i, o in enumerate(options, 1) if getattr(o, "basis", "model") != "model"]
    return ["**Measured:** hours below the model's own where a stored measurement matched:", "", *rows, ""] if rows else []
