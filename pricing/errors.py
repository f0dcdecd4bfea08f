"""Pricing errors live with the others in ``optimizer.errors``; re-exported for adapters."""

from optimizer.errors import GpucostError, MissingCredentials, ProviderError, StoreError

__all__ = ["GpucostError", "MissingCredentials", "ProviderError", "StoreError"]
