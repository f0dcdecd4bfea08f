"""Azure GPU VMs from the public Azure Retail Prices API (no credentials).

``fetch`` pages through ``GET https://prices.azure.com/api/retail/prices`` (``NextPageLink``) per
region, once for ``priceType eq 'Consumption'`` (pay-as-you-go and Spot) and once for
``priceType eq 'Reservation'``, keeping the items of the GPU sizes below. ``parse`` makes one offer
per size and region: the Linux pay-as-you-go rate, the Linux Spot rate, and the 1- and 3-year
reservations as ``azure_reservation`` commitments.

Format (Microsoft Learn, "Azure Retail Prices REST API", api-version 2023-01-01-preview, read
2026-12-01): items carry ``armSkuName``, ``armRegionName``, ``productName`` ("... Series Windows"
for Windows), ``skuName`` ("... Spot", "... Low Priority"), ``type``, ``unitOfMeasure`` ("1 Hour"),
``retailPrice`` and ``currencyCode``. A Reservation item's ``retailPrice`` is the TOTAL price of the
term (``reservationTerm`` "1 Year" / "3 Years"), not an hourly rate; its effective hourly rate is
that total over the term's hours. Reservations can be paid up front or monthly for the same total,
so they are recorded as ``all_upfront`` with the total as ``upfront_usd``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import gpu_spec
from optimizer.offer import HOURS_PER_MONTH, Commitment, Offer
from pricing.adapters._http import request_json, setting
from pricing.source import RawSnapshot, SourceSettings, register

logger = logging.getLogger(__name__)

PRICES_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
DEFAULT_REGIONS = ("eastus", "westus2", "southcentralus", "westeurope")
MAX_PAGES = 200  # per region and price type: a bound on what an answer can make us fetch
SOURCE = "azure:prices.azure.com/api/retail/prices"

# Training GPU sizes: (GPU, GPUs, vCPUs, RAM GB). Shapes as SkyPilot's catalog v6 azure/vms.csv
# lists them (read from Azure's Resource SKUs API), GPU counts checked against Microsoft's size
# pages (ND96isr_H100_v5 has 8 H100s).
SIZES: dict[str, tuple[str, int, int, float]] = {
    "Standard_NC4as_T4_v3": ("T4", 1, 4, 30.06),
    "Standard_NC8as_T4_v3": ("T4", 1, 8, 60.13),
    "Standard_NC16as_T4_v3": ("T4", 1, 16, 118.11),
    "Standard_NC64as_T4_v3": ("T4", 4, 64, 472.45),
    "Standard_NC6s_v3": ("V100", 1, 6, 120.26),
    "Standard_NC12s_v3": ("V100", 2, 12, 240.52),
    "Standard_NC24s_v3": ("V100", 4, 24, 481.04),
    "Standard_NC24rs_v3": ("V100", 4, 24, 481.04),
    "Standard_ND40rs_v2": ("V100-32GB", 8, 40, 721.55),
    "Standard_NC24ads_A100_v4": ("A100-80GB", 1, 24, 236.22),
    "Standard_NC48ads_A100_v4": ("A100-80GB", 2, 48, 472.45),
    "Standard_NC96ads_A100_v4": ("A100-80GB", 4, 96, 944.89),
    "Standard_ND96asr_v4": ("A100", 8, 96, 966.37),
    "Standard_ND96amsr_A100_v4": ("A100-80GB", 8, 96, 1932.74),
    "Standard_NC40ads_H100_v5": ("H100", 1, 40, 343.6),
    "Standard_NC80adis_H100_v5": ("H100", 2, 80, 687.19),
    "Standard_ND96isr_H100_v5": ("H100", 8, 96, 2040.11),
    "Standard_NV36ads_A10_v5": ("A10", 1, 36, 472.45),
    "Standard_NV72ads_A10_v5": ("A10", 2, 72, 944.89),
}
_TERMS = {"1 Year": 12, "3 Years": 36}


def _filter(region: str, price_type: str) -> str:
    return f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and priceType eq '{price_type}'"


def _linux(item: dict[str, Any]) -> bool:
    return "windows" not in str(item.get("productName", "")).lower()


def _usd(item: dict[str, Any]) -> float | None:
    if item.get("currencyCode", "USD") != "USD":
        return None
    try:
        value = float(item.get("retailPrice"))
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def azure_offers(payloads: dict[str, Any], as_of: datetime) -> list[Offer]:
    """Offers per size and region from the fetched items; pure."""
    rates: dict[tuple[str, str], dict[str, Any]] = {}
    for item in payloads.get("items", []):
        size, region = item.get("armSkuName"), item.get("armRegionName")
        if size not in SIZES or not region or not _linux(item):
            continue
        usd = _usd(item)
        if usd is None:
            continue
        slot = rates.setdefault((size, region), {"od": None, "spot": None, "terms": {}})
        sku = str(item.get("skuName", ""))
        kind = item.get("type")
        if kind == "Consumption" and item.get("unitOfMeasure") == "1 Hour":
            if sku.endswith("Low Priority"):
                continue  # Batch low-priority: not a VM price
            key = "spot" if sku.endswith("Spot") else "od"
            slot[key] = usd if slot[key] is None else min(slot[key], usd)
        elif kind == "Reservation" and item.get("reservationTerm") in _TERMS:
            months = _TERMS[item["reservationTerm"]]
            cur = slot["terms"].get(months)
            slot["terms"][months] = usd if cur is None else min(cur, usd)
    offers = []
    for (size, region), r in sorted(rates.items()):
        if r["od"] is None and r["spot"] is None:
            continue
        gpu, count, vcpus, ram = SIZES[size]
        commitments = [
            Commitment(kind="azure_reservation", term_months=months, payment="all_upfront", upfront_usd=total,
                       hourly_usd=0.0, effective_hourly_usd=round(total / (months * HOURS_PER_MONTH), 6),
                       source=f"{SOURCE} priceType=Reservation ({months // 12}y total)", as_of=as_of)
            for months, total in sorted(r["terms"].items())
        ]
        offers.append(Offer(
            provider="azure", region=region, instance_type=size, gpu=gpu, gpu_count=count,
            gpu_vram_gb=gpu_spec(gpu).vram_gb, vcpus=vcpus, ram_gb=ram, price_hour=r["od"],
            spot_price_hour=r["spot"], currency="USD", price_hour_native=r["od"], spot_price_hour_native=r["spot"],
            interconnect=gpu_spec(gpu).interconnect if count > 1 else None,
            source=f"{SOURCE} priceType=Consumption (Linux)", as_of=as_of, commitments=commitments,
        ))
    return offers


Getter = Callable[[str, dict[str, str] | None], Any]


@register
class AzureSource:
    name: ClassVar[str] = "azure"

    def __init__(self, regions: Iterable[str], url: str = PRICES_URL, get: Getter | None = None) -> None:
        self.regions = tuple(regions)
        self.url = url
        self.get: Getter = get or (lambda u, params: request_json("azure", u, params=params))

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> AzureSource:
        # A public API: nothing to skip for. Regions and endpoint can be changed.
        regions = setting(settings, "azure_regions", "GPUCOST_AZURE_REGIONS")
        return cls(
            [r.strip() for r in regions.split(",") if r.strip()] if regions else DEFAULT_REGIONS,
            setting(settings, "azure_prices_url", "GPUCOST_AZURE_PRICES_URL", PRICES_URL) or PRICES_URL,
        )

    def _items(self, region: str, price_type: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        page: Any = self.get(self.url, {"api-version": API_VERSION, "$filter": _filter(region, price_type)})
        for _ in range(MAX_PAGES):
            out.extend(i for i in page.get("Items", []) if isinstance(i, dict) and i.get("armSkuName") in SIZES)
            link = page.get("NextPageLink")
            if not link:
                return out
            page = self.get(str(link), None)
        logger.warning("azure %s %s: stopped after %d pages", region, price_type, MAX_PAGES)
        return out

    def fetch(self) -> RawSnapshot:
        now = datetime.now(UTC)
        items = [i for region in self.regions for t in ("Consumption", "Reservation") for i in self._items(region, t)]
        return RawSnapshot("azure", now, {"items": items})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return azure_offers(raw.payloads, raw.fetched_at)
