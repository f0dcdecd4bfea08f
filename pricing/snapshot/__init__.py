"""The price snapshot shipped inside the package: curated, sourced offers and local builds."""

from pricing.snapshot.loader import BundledSnapshot, load_bundled

__all__ = ["BundledSnapshot", "load_bundled"]
