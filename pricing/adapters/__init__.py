"""Price adapters, one module per source. Importing this package registers them all."""

from pricing.adapters import alibaba, autodl, aws, azure, gcp, lambda_cloud, local, runpod, skypilot_csv, vast

__all__ = ["alibaba", "autodl", "aws", "azure", "gcp", "lambda_cloud", "local", "runpod", "skypilot_csv", "vast"]
