"""Alibaba Cloud ECS gn-series GPU instances, priced in CNY through the ECS API.

``fetch`` lists the GPU instance types of the configured gn families per region
(``DescribeInstanceTypes``, paged by ``NextToken``), asks ``DescribePrice`` for each one's
pay-as-you-go hourly price, and ``DescribeSpotPriceHistory`` for its spot price per zone.
``parse`` keeps the CNY figures as ``price_hour_native`` and converts them to USD at the dated
rate of ``pricing.currency`` for the snapshot's day.

``DescribePrice`` prices the instance with its default system disk; where the answer itemises
(``DetailInfos``) only the ``instanceType`` line is taken, so offers compare with other clouds'
instance-only rates.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import find_gpu, gpu_spec
from optimizer.offer import Offer
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings, register

logger = logging.getLogger(__name__)

# gn families with NVIDIA training GPUs (Alibaba Cloud "GPU-accelerated compute-optimized" docs):
# gn5 P100, gn6v V100, gn6e V100 32 GB, gn6i T4, gn7 A100, gn7e A100 80 GB, gn7i A10, and their
# bare-metal ebm variants.
GN_FAMILIES: tuple[str, ...] = (
    "ecs.gn5",
    "ecs.gn6v",
    "ecs.gn6e",
    "ecs.gn6i",
    "ecs.gn7",
    "ecs.gn7e",
    "ecs.gn7i",
    "ecs.ebmgn6v",
    "ecs.ebmgn6e",
    "ecs.ebmgn6i",
    "ecs.ebmgn7e",
    "ecs.ebmgn7i",
)

_RETRIABLE_CODES = {"Throttling", "Throttling.User", "Throttling.Api", "ServiceUnavailable",
                    "InternalError", "UnknownError"}
# Per-type answers that only mean "not sold here": the type is skipped, the refresh goes on.
_NOT_SOLD_CODES = {"InvalidInstanceType.NotFound", "InvalidInstanceType.ValueNotSupported",
                   "Zone.NotOnSale", "InvalidResourceType.NotSupported", "InvalidParameter"}

_FAMILIES_PER_REQUEST = 10

ToUsd = Callable[[float, str, date], float]


def _default_to_usd(amount: float, currency: str, on: date) -> float:
    from pricing.currency import fx_rate

    return fx_rate(currency, on=on).to_usd(amount)


def _code(exc: Exception) -> str:
    return str(getattr(exc, "code", "") or "")


def _provider_error(exc: Exception) -> ProviderError:
    from alibabacloud_tea_openapi.exceptions import ThrottlingException

    code = _code(exc)
    retriable = (
        isinstance(exc, (ThrottlingException, TimeoutError, ConnectionError))
        or code in _RETRIABLE_CODES
        or "timed out" in str(exc).lower()
    )
    reason = f"{code or type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
    return ProviderError("alibaba", reason, retriable)


def _gpu_name(spec: str, vram_gb: float | None) -> str | None:
    """Canonical GPU for DescribeInstanceTypes' ``GPUSpec`` ("NVIDIA V100") and per-GPU memory."""
    gpu = find_gpu(spec)
    if gpu is not None and vram_gb and abs(gpu_spec(gpu).vram_gb - vram_gb) > 4:
        # One spec string for two memory sizes (gn6e V100 32 GB, gn7e A100 80 GB).
        gpu = find_gpu(f"{spec} {round(vram_gb)}GB") or gpu
    return gpu


def _instance_price(body: dict[str, Any]) -> tuple[float, str] | None:
    """(hourly trade price, currency) of the instance itself from a DescribePrice body."""
    price = (body.get("PriceInfo") or {}).get("Price") or {}
    currency = price.get("Currency") or "CNY"
    for detail in (price.get("DetailInfos") or {}).get("DetailInfo") or []:
        if detail.get("Resource") == "instanceType" and detail.get("TradePrice"):
            return float(detail["TradePrice"]), currency
    if price.get("TradePrice"):
        return float(price["TradePrice"]), currency
    return None


def _latest_spot(body: dict[str, Any]) -> dict[str, float]:
    newest: dict[str, tuple[str, float]] = {}
    for rec in (body.get("SpotPrices") or {}).get("SpotPriceType") or []:
        zone, stamp, price = rec.get("ZoneId"), str(rec.get("Timestamp", "")), rec.get("SpotPrice")
        if zone and price and float(price) > 0 and (zone not in newest or stamp > newest[zone][0]):
            newest[zone] = (stamp, float(price))
    return {z: p for z, (_, p) in newest.items()}


def alibaba_offers(payloads: dict[str, Any], as_of: datetime, to_usd: ToUsd) -> list[Offer]:
    """Offers from fetched ``to_map()`` bodies; pure apart from the injected converter."""
    offers: list[Offer] = []
    day = as_of.date()
    for region, data in payloads.get("regions", {}).items():
        prices = data.get("prices", {})
        spots = data.get("spot", {})
        for it in data.get("instance_types", []):
            itype = it.get("InstanceTypeId", "")
            count = float(it.get("GPUAmount") or 0)
            vram = float(it.get("GPUMemorySize") or 0) or None
            gpu = _gpu_name(it.get("GPUSpec") or "", vram)
            if not itype.startswith(("ecs.gn", "ecs.ebmgn")) or count <= 0:
                continue
            if gpu is None:
                logger.warning("alibaba %s: GPU %r unknown, skipped", itype, it.get("GPUSpec"))
                continue
            priced = _instance_price(prices.get(itype) or {})
            spot_by_zone = _latest_spot(spots.get(itype) or {})
            if priced is None and not spot_by_zone:
                continue
            native, currency = priced if priced else (None, "CNY")
            usd = round(to_usd(native, currency, day), 6) if native else None
            zones: list[str | None] = sorted(spot_by_zone) or [None]
            for zone in zones:
                spot_native = spot_by_zone.get(zone) if zone else None
                spot_usd = round(to_usd(spot_native, currency, day), 6) if spot_native else None
                offers.append(
                    Offer(
                        provider="alibaba",
                        region=region,
                        zone=zone,
                        instance_type=itype,
                        gpu=gpu,
                        gpu_count=count,
                        gpu_vram_gb=gpu_spec(gpu).vram_gb,
                        vcpus=float(it["CpuCoreCount"]) if it.get("CpuCoreCount") else None,
                        ram_gb=round(float(it["MemorySize"]) * 1.073741824, 2)
                        if it.get("MemorySize")
                        else None,
                        price_hour=usd,
                        spot_price_hour=spot_usd,
                        currency=currency,
                        price_hour_native=native,
                        spot_price_hour_native=spot_native,
                        # Pay-as-you-go ECS is billed by the second.
                        billing_increment_s=1,
                        min_billing_s=60,
                        interconnect=gpu_spec(gpu).interconnect if count > 1 else None,
                        source="alibaba:ecs.DescribePrice"
                        + ("+DescribeSpotPriceHistory" if spot_native else ""),
                        as_of=as_of,
                    )
                )
    return offers


@register
class AlibabaSource:
    name: ClassVar[str] = "alibaba"

    def __init__(
        self,
        regions: Iterable[str],
        client_for: Callable[[str], Any],
        families: Iterable[str] = GN_FAMILIES,
        to_usd: ToUsd = _default_to_usd,
    ) -> None:
        self.regions = tuple(regions)
        self.client_for = client_for
        self.families = tuple(families)
        self.to_usd = to_usd

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> AlibabaSource:
        key = os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_ID")
        secret = os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
        if not key or not secret:
            raise MissingCredentials(
                "alibaba", "ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET not set"
            )

        def client_for(region: str) -> Any:
            from alibabacloud_ecs20140526.client import Client
            from alibabacloud_tea_openapi.models import Config

            return Client(
                Config(
                    access_key_id=key,
                    access_key_secret=secret,
                    region_id=region,
                    endpoint=f"ecs.{region}.aliyuncs.com",
                )
            )

        return cls(settings.alibaba_regions, client_for)

    def _instance_types(self, client: Any) -> list[dict[str, Any]]:
        from alibabacloud_ecs20140526 import models

        found: dict[str, dict[str, Any]] = {}
        # InstanceTypeFamilies takes a bounded list per request; ask in chunks.
        for start in range(0, len(self.families), _FAMILIES_PER_REQUEST):
            chunk = list(self.families[start : start + _FAMILIES_PER_REQUEST])
            token: str | None = None
            while True:
                request = models.DescribeInstanceTypesRequest(
                    instance_type_families=chunk, max_results=100, next_token=token
                )
                body = client.describe_instance_types(request).body
                for it in body.instance_types.instance_type if body.instance_types else []:
                    found.setdefault(it.instance_type_id, it.to_map())
                token = body.next_token
                if not token:
                    break
        return list(found.values())

    def _price(self, client: Any, region: str, itype: str) -> dict[str, Any] | None:
        from alibabacloud_ecs20140526 import models

        request = models.DescribePriceRequest(
            region_id=region, resource_type="instance", instance_type=itype, price_unit="Hour"
        )
        try:
            return client.describe_price(request).body.to_map()
        except Exception as exc:  # the SDK's own exception classes; re-raised unless "not sold"
            if _code(exc) in _NOT_SOLD_CODES:
                logger.info("alibaba %s %s not sold: %s", region, itype, _code(exc))
                return None
            raise

    def _spot(self, client: Any, region: str, itype: str) -> dict[str, Any]:
        from alibabacloud_ecs20140526 import models

        merged: list[dict[str, Any]] = []
        offset: int | None = None
        while True:
            request = models.DescribeSpotPriceHistoryRequest(
                region_id=region, instance_type=itype, network_type="vpc", ostype="linux",
                offset=offset,
            )
            try:
                body = client.describe_spot_price_history(request).body.to_map()
            except Exception as exc:
                if _code(exc) in _NOT_SOLD_CODES:
                    return {}
                raise
            merged.extend((body.get("SpotPrices") or {}).get("SpotPriceType") or [])
            next_offset = body.get("NextOffset")
            if not next_offset or next_offset == offset:
                return {"SpotPrices": {"SpotPriceType": merged}}
            offset = next_offset

    def fetch(self) -> RawSnapshot:
        regions: dict[str, Any] = {}
        try:
            for region in self.regions:
                client = self.client_for(region)
                types = self._instance_types(client)
                prices: dict[str, Any] = {}
                spot: dict[str, Any] = {}
                for it in types:
                    itype = it.get("InstanceTypeId", "")
                    if not it.get("GPUAmount"):
                        continue
                    prices[itype] = self._price(client, region, itype)
                    spot[itype] = self._spot(client, region, itype)
                regions[region] = {"instance_types": types, "prices": prices, "spot": spot}
        except ProviderError:
            raise
        except Exception as exc:  # SDK errors have no common base beyond Exception
            raise _provider_error(exc) from exc
        return RawSnapshot("alibaba", datetime.now(UTC), {"regions": regions})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return alibaba_offers(raw.payloads, raw.fetched_at, self.to_usd)
