"""AWS EC2 GPU instances: on-demand from the Price List Query API, spot from EC2.

``fetch`` pages through ``pricing.get_products`` (AmazonEC2, Linux, Shared tenancy, no
pre-installed software, capacity status Used, GPU instances) per region,
``ec2.describe_instance_types`` for the GPU model, count, memory, vCPUs and RAM, and ``ec2.describe_spot_price_history`` for the
current Linux/UNIX spot price per availability zone. ``parse`` joins them: one offer per zone
with a spot price (on-demand repeated), or one region-wide offer when there is no spot price.

Price List items are JSON strings. ``OnDemand`` terms give the hourly rental price; zero-priced
dimensions are skipped: Capacity Block SKUs list 0.00 per hour. ``Reserved`` terms of the same
items, Savings Plans rates (``savingsplans``) and Capacity Block offerings become the offers'
``commitments`` (``pricing.adapters.aws_commitments``); those two extra APIs are optional: a
caller without their permissions still gets on-demand and spot prices.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import find_gpu, gpu_spec
from optimizer.offer import Commitment, Offer
from pricing.adapters.aws_commitments import capacity_blocks, reserved_terms, savings_plan_rates
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings, register

logger = logging.getLogger(__name__)

# Instance families with NVIDIA GPUs that training can use, and their GPU when EC2 did not
# describe the type (AWS "Accelerated computing" instance type pages).
GPU_FAMILIES: dict[str, str] = {
    "p3": "V100",
    "p3dn": "V100-32GB",
    "g4dn": "T4",
    "g5": "A10G",
    "g6": "L4",
    "g6e": "L40S",
    "gr6": "L4",
    "p4d": "A100",
    "p4de": "A100-80GB",
    "p5": "H100",
    "p5e": "H200",
    "p5en": "H200",
    "p6-b200": "B200",
}

# Types sold as EC2 Capacity Blocks for ML (AWS "Capacity Blocks for ML" user guide, 2025).
CAPACITY_BLOCK_TYPES = re.compile(r"^(p4d|p4de|p5|p5e|p5en|p6-[a-z0-9]+)\.(24|48)xlarge$")

# The Price List Query API answers only in a few regions; us-east-1 serves every region's prices.
PRICING_ENDPOINT_REGION = "us-east-1"

_RETRIABLE_CODES = {
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalError",
    "InternalFailure",
    "InternalErrorException",
}


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def _provider_error(exc: Exception) -> ProviderError:
    from botocore import exceptions as bexc

    if isinstance(exc, bexc.NoCredentialsError):
        return MissingCredentials("aws", str(exc))
    if isinstance(exc, bexc.ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        return ProviderError("aws", f"{code}: {exc}", code in _RETRIABLE_CODES)
    retriable = isinstance(
        exc, (bexc.ConnectTimeoutError, bexc.ReadTimeoutError, bexc.EndpointConnectionError)
    )
    return ProviderError("aws", f"{type(exc).__name__}: {exc}", retriable)


def _product_filters(region: str) -> list[dict[str, str]]:
    wanted = {
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "instanceFamily": "GPU instance",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def _on_demand_usd(item: dict[str, Any]) -> float | None:
    """The hourly USD rate of an item's OnDemand term; None when it has none above zero."""
    for term in (item.get("terms", {}).get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            if dim.get("unit") != "Hrs":
                continue
            try:
                usd = float(dim.get("pricePerUnit", {}).get("USD", "0"))
            except (TypeError, ValueError, AttributeError):  # null, a list, "n/a": no price
                continue
            if usd > 0 and math.isfinite(usd):
                return usd
    return None


def _is_plain_linux_on_demand(attrs: dict[str, str]) -> bool:
    return (
        attrs.get("operatingSystem") == "Linux"
        and attrs.get("tenancy") == "Shared"
        and attrs.get("preInstalledSw") == "NA"
        and attrs.get("capacitystatus") == "Used"
        # "RunInstances:CB" is a Capacity Block, "RunInstances:0xxx" carries a licence.
        and attrs.get("operation", "RunInstances") == "RunInstances"
        and attrs.get("marketoption", "OnDemand") == "OnDemand"
    )


def on_demand_prices(items: Iterable[str | dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{instance_type: {"usd": rate, "attrs": attributes}}`` from Price List items; pure."""
    out: dict[str, dict[str, Any]] = {}
    for raw in items:
        try:
            item = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            logger.warning("skipping a Price List item that is not JSON")
            continue
        try:
            attrs = item.get("product", {}).get("attributes", {})
            instance_type = attrs.get("instanceType", "")
            if _family(instance_type) not in GPU_FAMILIES or not _is_plain_linux_on_demand(attrs):
                continue
            usd = _on_demand_usd(item)
        except (AttributeError, TypeError):  # valid JSON of another shape (a number, a list ...)
            logger.warning("skipping a Price List item of an unexpected shape")
            continue
        if usd is None:
            continue
        out[instance_type] = {"usd": usd, "attrs": attrs, "reserved": item.get("terms", {}).get("Reserved")}
    return out


def latest_spot(history: Iterable[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """``{(instance_type, zone): USD}``: the newest Linux/UNIX price per zone; pure."""
    newest: dict[tuple[str, str], tuple[str, float]] = {}
    for rec in history:
        if not str(rec.get("ProductDescription", "")).startswith("Linux/UNIX"):
            continue
        try:
            price = float(rec["SpotPrice"])
        except (KeyError, ValueError):
            continue
        key = (rec["InstanceType"], rec["AvailabilityZone"])
        stamp = str(rec.get("Timestamp", ""))
        if price > 0 and (key not in newest or stamp > newest[key][0]):
            newest[key] = (stamp, price)
    return {k: v for k, (_, v) in newest.items()}


def _gpu_facts(
    instance_type: str, described: dict[str, Any] | None, attrs: dict[str, str] | None
) -> tuple[str, float, float, float | None, float | None] | None:
    """(gpu, count, vram_gb per GPU, vcpus, ram_gb) from EC2's description, else the price list."""
    if described and described.get("GpuInfo", {}).get("Gpus"):
        g = described["GpuInfo"]["Gpus"][0]
        mib = float(g.get("MemoryInfo", {}).get("SizeInMiB") or 0)
        gpu = find_gpu(g.get("Name", ""))
        if gpu is not None and mib and abs(gpu_spec(gpu).vram_gb - mib / 1024) > 4:
            # EC2 names p4de's GPU "A100" and p3dn's "V100"; the memory tells the variant.
            gpu = find_gpu(f"{g['Name']}-{round(mib / 1024)}GB") or gpu
        count = float(g.get("Count") or 0)
        partition = g.get("GpuPartitionSize")
        if not count and partition:
            count = float(partition)
        if gpu is None or count <= 0:
            return None
        vram = gpu_spec(gpu).vram_gb if count >= 1 else round(mib * 1.048576e-3, 2)
        vcpus = described.get("VCpuInfo", {}).get("DefaultVCpus")
        ram_mib = described.get("MemoryInfo", {}).get("SizeInMiB")
        ram = round(ram_mib * 1.048576e-3, 2) if ram_mib else None
        return gpu, count, vram, float(vcpus) if vcpus else None, ram
    if attrs:
        gpu = GPU_FAMILIES.get(_family(instance_type))
        try:
            count = float(attrs.get("gpu", "0"))
            vcpus = float(attrs["vcpu"]) if attrs.get("vcpu") else None
            ram_gib = float(attrs.get("memory", "").split()[0]) if attrs.get("memory") else None
        except ValueError:
            return None
        if gpu is None or count <= 0:
            return None
        ram = round(ram_gib * 1.073741824, 2) if ram_gib else None
        return gpu, count, gpu_spec(gpu).vram_gb, vcpus, ram
    return None


def aws_offers(payloads: dict[str, Any], as_of: datetime) -> list[Offer]:
    """Offers per region and zone from fetched payloads; pure."""
    offers: list[Offer] = []
    for region, data in payloads.get("regions", {}).items():
        prices = on_demand_prices(data.get("products", []))
        described = {d["InstanceType"]: d for d in data.get("instance_types", [])}
        spot = latest_spot(data.get("spot_history", []))
        plans = savings_plan_rates(data.get("savings_plan_rates", []), as_of)
        blocks = capacity_blocks(data.get("capacity_blocks", []), as_of)
        zones_by_type: dict[str, list[str]] = {}
        for (itype, zone) in sorted(spot):
            zones_by_type.setdefault(itype, []).append(zone)
        for itype in sorted(set(prices) | set(zones_by_type)):
            if _family(itype) not in GPU_FAMILIES:
                continue
            facts = _gpu_facts(itype, described.get(itype), prices.get(itype, {}).get("attrs"))
            if facts is None:
                logger.warning("aws %s %s: no GPU facts, skipped", region, itype)
                continue
            gpu, count, vram, vcpus, ram = facts
            on_demand = prices.get(itype, {}).get("usd")
            reserved = reserved_terms({"terms": {"Reserved": prices.get(itype, {}).get("reserved")}}, as_of)
            commitments = reserved + plans.get((itype, region), [])
            zones: list[str | None] = list(zones_by_type.get(itype, [])) or [None]
            for zone in zones:
                spot_price = spot.get((itype, zone)) if zone else None
                if on_demand is None and spot_price is None:
                    continue
                offers.append(
                    Offer(
                        provider="aws",
                        region=region,
                        zone=zone,
                        instance_type=itype,
                        gpu=gpu,
                        gpu_count=count,
                        gpu_vram_gb=vram,
                        vcpus=vcpus,
                        ram_gb=ram,
                        price_hour=on_demand,
                        spot_price_hour=spot_price,
                        currency="USD",
                        price_hour_native=on_demand,
                        spot_price_hour_native=spot_price,
                        # Linux instances bill per second with a one-minute minimum.
                        billing_increment_s=1,
                        min_billing_s=60,
                        interconnect=gpu_spec(gpu).interconnect if count > 1 else None,
                        source=_source_label(on_demand, spot_price),
                        as_of=as_of,
                        commitments=commitments + _blocks_in(blocks, itype, region, zone),
                    )
                )
    return offers


def _blocks_in(
    blocks: dict[tuple[str, str], list[Commitment]], itype: str, region: str, zone: str | None
) -> list:
    """Capacity blocks of ``itype`` in ``zone``, or in any zone of ``region`` for a region-wide offer."""
    return [c for (t, z), cs in sorted(blocks.items(), key=lambda kv: kv[0])
            if t == itype and (z == zone if zone else z.startswith(region)) for c in cs]


def _source_label(on_demand: float | None, spot: float | None) -> str:
    """Which API calls a price came from, for provenance."""
    spot_api = "ec2.describe_spot_price_history"
    if on_demand is None:
        return f"aws:{spot_api}"
    return "aws:pricing.get_products" + (f"+{spot_api}" if spot else "")


def _jsonable(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in rec.items()}


@register
class AwsSource:
    name: ClassVar[str] = "aws"

    def __init__(
        self,
        regions: Iterable[str],
        pricing_client: Any,
        ec2_client_for: Callable[[str], Any],
        savingsplans_client: Any = None,
        capacity_blocks: bool = False,
    ) -> None:
        self.regions = tuple(regions)
        self.pricing_client = pricing_client
        self.ec2_client_for = ec2_client_for
        # None: Savings Plans rates are not asked for (reserved terms still come with products).
        self.savingsplans_client = savingsplans_client
        # Off by default for callers that build the source by hand (moto serves no such call).
        self.capacity_blocks = capacity_blocks

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> AwsSource:
        import boto3
        from botocore.config import Config

        session = boto3.Session()
        if session.get_credentials() is None:
            raise MissingCredentials("aws", "no credentials in the AWS credential chain")
        # Adaptive retries back off on throttling inside botocore before we ever see an error.
        config = Config(retries={"max_attempts": 8, "mode": "adaptive"})
        return cls(
            settings.aws_regions,
            session.client("pricing", region_name=PRICING_ENDPOINT_REGION, config=config),
            lambda region: session.client("ec2", region_name=region, config=config),
            # The Savings Plans API is global, served from us-east-1.
            session.client("savingsplans", region_name="us-east-1", config=config),
            capacity_blocks=True,
        )

    def _products(self, region: str) -> list[str]:
        items: list[str] = []
        kwargs: dict[str, Any] = {
            "ServiceCode": "AmazonEC2",
            "Filters": _product_filters(region),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        while True:
            page = self.pricing_client.get_products(**kwargs)
            items.extend(page.get("PriceList", []))
            token = page.get("NextToken")
            if not token:
                return items
            kwargs["NextToken"] = token

    def _instance_types(self, ec2: Any) -> list[dict[str, Any]]:
        out = []
        filters = [{"Name": "instance-type", "Values": [f"{f}.*" for f in GPU_FAMILIES]}]
        for page in ec2.get_paginator("describe_instance_types").paginate(Filters=filters):
            for it in page.get("InstanceTypes", []):
                if it.get("GpuInfo"):
                    out.append(
                        {
                            "InstanceType": it["InstanceType"],
                            "VCpuInfo": it.get("VCpuInfo", {}),
                            "MemoryInfo": it.get("MemoryInfo", {}),
                            "GpuInfo": it["GpuInfo"],
                        }
                    )
        return out

    def _spot_history(
        self, ec2: Any, instance_types: list[str], now: datetime
    ) -> list[dict[str, Any]]:
        if not instance_types:
            return []
        out = []
        # StartTime = now returns the price in force now for each zone.
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=instance_types, ProductDescriptions=["Linux/UNIX"], StartTime=now
        )
        for page in pages:
            out.extend(_jsonable(r) for r in page.get("SpotPriceHistory", []))
        return out

    def _savings_plan_rates(self, region: str, instance_types: list[str]) -> list[dict[str, Any]]:
        if self.savingsplans_client is None or not instance_types:
            return []
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "products": ["EC2"],
            "serviceCodes": ["AmazonEC2"],
            "operations": ["RunInstances"],
            "filters": [
                {"name": "region", "values": [region]},
                {"name": "instanceType", "values": instance_types},
                {"name": "productDescription", "values": ["Linux/UNIX"]},
                {"name": "tenancy", "values": ["shared"]},
            ],
            "maxResults": 1000,
        }
        while True:
            page = self.savingsplans_client.describe_savings_plans_offering_rates(**kwargs)
            out.extend(page.get("searchResults", []))
            token = page.get("nextToken")
            if not token:
                return out
            kwargs["nextToken"] = token

    def _capacity_blocks(self, ec2: Any, instance_types: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.capacity_blocks:
            return out
        for itype in instance_types:
            if not CAPACITY_BLOCK_TYPES.match(itype):
                continue
            # One instance for one day: the shortest block, priced like the longer ones per hour.
            page = ec2.describe_capacity_block_offerings(
                InstanceType=itype, InstanceCount=1, CapacityDurationHours=24
            )
            out.extend(_jsonable(o) for o in page.get("CapacityBlockOfferings", []))
        return out

    def _optional(self, what: str, call: Callable[[], list[dict[str, Any]]], errors: list[str]) -> list[dict[str, Any]]:
        """Commitment prices are extras: without permission for them, keep on-demand and spot."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            logger.warning("aws %s skipped: %s", what, exc)
            errors.append(f"{what}: {_provider_error(exc).reason}")
            return []

    def fetch(self) -> RawSnapshot:
        from botocore.exceptions import BotoCoreError, ClientError

        now = datetime.now(UTC)
        regions: dict[str, Any] = {}
        errors: list[str] = []
        try:
            for region in self.regions:
                ec2 = self.ec2_client_for(region)
                described = self._instance_types(ec2)
                types = sorted(d["InstanceType"] for d in described)
                regions[region] = {
                    "products": self._products(region),
                    "instance_types": described,
                    "spot_history": self._spot_history(ec2, types, now),
                    "savings_plan_rates": self._optional(
                        "savings plan rates", lambda: self._savings_plan_rates(region, types), errors
                    ),
                    "capacity_blocks": self._optional(
                        "capacity blocks", lambda: self._capacity_blocks(ec2, types), errors
                    ),
                }
        except (ClientError, BotoCoreError) as exc:
            raise _provider_error(exc) from exc
        return RawSnapshot("aws", now, {"regions": regions, "commitment_errors": errors})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return aws_offers(raw.payloads, raw.fetched_at)
