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
    "azure": StoragePrice(0.075, "Standard SSD managed disk (E10, LRS)",
                          "azure.microsoft.com/pricing/details/managed-disks: E10 128 GiB $9.60/month, East US "
                          "($0.075/GiB-month)", date(2025, 6, 30)),
    "nebius": StoragePrice(0.066, "Network SSD disk",
                           "docs.nebius.com/compute/resources/pricing: network_ssd $0.071 per GiB per 730 h "
                           "($0.066/GB-month)", date(2025, 11, 30)),
    # Vast.ai hosts set their own storage price (docs.vast.ai/documentation/instances/pricing: compute,
    # storage and bandwidth are charged apart, storage for every second an instance exists); the catalog
    # rows carry no figure, so this is a planning assumption from the listings' usual range.
    "vast": StoragePrice(0.15, "host disk (host-set price; assumption)",
                         "docs.vast.ai/documentation/instances/pricing: storage priced per host; $0.15/GB-month is "
                         "an assumption within the usual $0.10-0.20 of listings", date(2025, 11, 30)),
    "paperspace": StoragePrice(0.09, "CORE block storage (100 GB tier)",
                               "paperspace.com/pricing: 100 GB storage $9/month", date(2024, 6, 30)),
    "alibaba": StoragePrice(0.07, "ESSD PL0 cloud disk",
                            "alibabacloud.com/product/disk/pricing: ESSD PL0 about CNY 0.5/GB-month in mainland "
                            "regions ($0.07)", date(2026, 8, 21)),
    "autodl": StoragePrice(0.028, "data disk beyond the free 50 GB",
                           "autodl.com/docs/price: data disk expansion CNY 0.0066/GB-day (about $0.028/GB-month; "
                           "the first 50 GB are free)", date(2026, 8, 30)),
    # A subscription's session disk comes with it; nothing is billed by the GB.
    "colab": StoragePrice(0.0, "session disk (included)", "colab.research.google.com/signup: disk included in "
                          "the plan", date(2022, 9, 30)),
}


def block_storage_usd_per_gb_month(provider: str) -> float | None:
    price = BLOCK_STORAGE.get(provider.lower())
    return price.usd_per_gb_month if price else None


def storage_price(provider: str) -> StoragePrice | None:
    return BLOCK_STORAGE.get(provider.lower())
