"""The limits a decision reads: stored ones (last refresh), then the user's file over them."""

from __future__ import annotations

from typing import Any

from optimizer.quotas import QuotaBook
from pricing.quotas.file import load_quota_file
from pricing.store.quotas import stored_quotas


def quota_book_for(prices: Any, quotas_file: str | None) -> QuotaBook:
    """Stored quotas of ``prices``' store, overridden row by row by ``quotas_file`` (if set)."""
    limits = stored_quotas(prices)
    if quotas_file:
        limits = [*limits, *load_quota_file(quotas_file)]
    return QuotaBook(limits)
