"""Price adapters, one module per source. Importing this package registers them all."""

from pricing.adapters import alibaba, autodl, aws, gcp, local, skypilot_csv

__all__ = ["alibaba", "autodl", "aws", "gcp", "local", "skypilot_csv"]
