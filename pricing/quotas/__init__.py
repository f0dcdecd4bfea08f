"""Account quotas: read from AWS Service Quotas and GCP Compute, or from the user's file.

``refresh`` (``gpucost quotas refresh``) fetches and stores them; ``quota_book_for`` gives a
decision the stored limits with the ``GPUCOST_QUOTAS`` file laid over them (``optimizer.quotas``).
"""

from pricing.quotas.book import quota_book_for
from pricing.quotas.file import load_quota_file
from pricing.quotas.refresh import QuotaRefreshResult, refresh_quotas

__all__ = ["QuotaRefreshResult", "load_quota_file", "quota_book_for", "refresh_quotas"]
