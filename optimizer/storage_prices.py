"""Block-storage list prices per provider (USD per GB-month), for the disk a rented run needs.

Each figure is the provider's published price of its general-purpose network disk, in the region
the catalog rows mostly come from; a provider without a figure here has ``None`` (its storage is
included in the instance price, or no public figure was found), and costs nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True, slots=True)
class StoragePrice:
    usd_per_gb_month: float
    product: str
    source: str
    as_of: date


BLOCK_STORAGE: dict[str, StoragePrice] = {
    "aws": StoragePrice(0.08, "EBS gp3", "aws.amazon.com/ebs/pricing: gp3 $0.08/GB-month, US East (N. Virginia)",
                        date(2025, 11, 30)),
    "gcp": StoragePrice(0.10, "Balanced persistent disk",
                        "cloud.google.com/compute/disks-image-pricing: pd-balanced $0.100/GB-month, us-central1",
                        date(2025, 11, 30)),
    "lambda": StoragePrice(0.20, "persistent filesystem", "lambda.ai/pricing: filesystem storage $0.20/GB-month",
                           date(2025, 11, 30)),
    "runpod": StoragePrice(0.10, "pod volume disk", "runpod.io/pricing: volume disk $0.10/GB-month while the pod runs",
                           date(2025, 6, 30)),
}


def block_storage_usd_per_gb_month(provider: str) -> float | None:
    price = BLOCK_STORAGE.get(provider.lower())
    return price.usd_per_gb_month if price else None
