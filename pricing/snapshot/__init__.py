"""The price snapshot shipped inside the package: curated, sourced offers and local builds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pricing.snapshot.loader import BundledSnapshot, load_bundled

__all__ = ["BundledSnapshot", "load_bundled"]


def __getattr__(name: str) -> Any:
    # The loader (and through it every price adapter) is imported when asked for: reading a
    # bundled data file, as the currency table does, needs only this package.
    if name in __all__:
        from pricing.snapshot import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
