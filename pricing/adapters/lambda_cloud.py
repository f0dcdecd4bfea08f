"""Lambda Cloud on-demand instances from its public API (needs an API key: ``LAMBDA_API_KEY``).

``GET https://cloud.lambda.ai/api/v1/instance-types`` with ``Authorization: Bearer <key>``
answers ``{"data": {"<type>": {"instance_type": {"name", "description", "gpu_description",
"price_cents_per_hour", "specs": {"vcpus", "memory_gib", "storage_gib", "gpus"}},
"regions_with_capacity_available": [{"name", "description"}]}}}`` (Lambda Cloud API reference,
https://docs.lambda.ai/api/cloud#listInstanceTypes, read 2026-12-01). One offer per type and
region with capacity now; a type with none is left out (it cannot be rented now) and counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import gpu_spec
from optimizer.offer import Offer
from pricing.adapters._gpu_names import canonical_gpu
from pricing.adapters._http import request_json, setting
from pricing.errors import MissingCredentials
from pricing.source import RawSnapshot, SourceSettings, register

logger = logging.getLogger(__name__)

API_URL = "https://cloud.lambda.ai/api/v1/instance-types"
SOURCE = "lambda:cloud.lambda.ai/api/v1/instance-types"
_GIB_TO_GB = 1.073741824


def _gpu(description: str) -> str | None:
    """'A100 (40 GB SXM4)' -> A100; '8x H100 (80 GB SXM5)' -> H100."""
    base = re.sub(r"^\d+x\s*", "", description.split("(", 1)[0]).strip()
    mem = re.search(r"(\d+)\s*GB", description)
    return canonical_gpu(base, float(mem.group(1)) if mem else None)


def lambda_offers(payloads: dict[str, Any], as_of: datetime) -> list[Offer]:
    """Offers from an instance-types answer; pure."""
    offers = []
    no_capacity = 0
    for entry in (payloads.get("instance_types", {}).get("data") or {}).values():
        try:
            it = entry["instance_type"]
            specs = it.get("specs") or {}
            count = int(specs.get("gpus") or 0)
            usd = float(it["price_cents_per_hour"]) / 100
        except (KeyError, TypeError, ValueError):
            continue
        gpu = _gpu(str(it.get("gpu_description") or it.get("description") or ""))
        if gpu is None or count <= 0 or usd <= 0:
            continue  # CPU types, or a GPU gpucost has no specs for
        regions = [r.get("name") for r in entry.get("regions_with_capacity_available") or [] if r.get("name")]
        if not regions:
            no_capacity += 1
            continue
        ram = specs.get("memory_gib")
        for region in sorted(regions):
            offers.append(Offer(
                provider="lambda", region=region, instance_type=str(it["name"]), gpu=gpu, gpu_count=count,
                gpu_vram_gb=gpu_spec(gpu).vram_gb, vcpus=float(specs["vcpus"]) if specs.get("vcpus") else None,
                ram_gb=round(float(ram) * _GIB_TO_GB, 2) if ram else None, price_hour=usd, currency="USD",
                price_hour_native=usd, interconnect=gpu_spec(gpu).interconnect if count > 1 else None,
                source=SOURCE, as_of=as_of,
            ))
    if no_capacity:
        logger.info("lambda: %d GPU types without capacity now were left out", no_capacity)
    return offers


@register
class LambdaSource:
    name: ClassVar[str] = "lambda"

    def __init__(self, api_key: str, url: str = API_URL, get: Callable[..., Any] | None = None) -> None:
        self.api_key = api_key
        self.url = url
        self.get = get or request_json

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> LambdaSource:
        key = setting(settings, "lambda_api_key", "LAMBDA_API_KEY")
        if not key:
            raise MissingCredentials("lambda", "LAMBDA_API_KEY is not set (Lambda's API needs a key)")
        return cls(key, setting(settings, "lambda_api_url", "GPUCOST_LAMBDA_API_URL", API_URL) or API_URL)

    def fetch(self) -> RawSnapshot:
        now = datetime.now(UTC)
        answer = self.get("lambda", self.url, headers={"Authorization": f"Bearer {self.api_key}"})
        return RawSnapshot("lambda", now, {"instance_types": answer})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return lambda_offers(raw.payloads, raw.fetched_at)
