"""RunPod GPU pods from its GraphQL API (needs an API key: ``RUNPOD_API_KEY``).

``POST https://api.runpod.io/graphql?api_key=<key>`` with the ``gpuTypes`` query below answers
``{"data": {"gpuTypes": [{"id", "displayName", "memoryInGb", "maxGpuCount", "secureCloud",
"communityCloud", "securePrice", "communityPrice", "secureSpotPrice", "communitySpotPrice"}]}}``,
prices in USD per GPU-hour (RunPod GraphQL reference, https://graphql-spec.runpod.io/ type
``GpuType``, and https://docs.runpod.io/sdks/graphql/manage-pods for the endpoint and key, read
2026-12-01). One offer per GPU type, cloud (secure / community) and GPU count 1, 2, 4, 8 up to
``maxGpuCount``, named as SkyPilot's catalog names RunPod types (``8x_RTX4090_SECURE``). The prices
hold in every data centre, so the region is ``global``. Spot is RunPod's interruptible price.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import gpu_spec
from optimizer.offer import Offer
from pricing.adapters._gpu_names import canonical_gpu
from pricing.adapters._http import request_json, setting
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings, register

API_URL = "https://api.runpod.io/graphql"
SOURCE = "runpod:api.runpod.io/graphql gpuTypes"
QUERY = """query GpuTypes { gpuTypes { id displayName memoryInGb maxGpuCount secureCloud communityCloud
  securePrice communityPrice secureSpotPrice communitySpotPrice } }"""
COUNTS = (1, 2, 4, 8)


def _price(value: Any) -> float | None:
    try:
        usd = float(value)
    except (TypeError, ValueError):
        return None
    return usd if usd > 0 else None


def runpod_offers(payloads: dict[str, Any], as_of: datetime) -> list[Offer]:
    """Offers from a gpuTypes answer; pure."""
    offers = []
    for t in (payloads.get("gpu_types", {}).get("data") or {}).get("gpuTypes") or []:
        if not isinstance(t, dict):
            continue
        gpu = canonical_gpu(str(t.get("displayName") or t.get("id") or ""), _price(t.get("memoryInGb")))
        if gpu is None:
            continue
        top = int(t.get("maxGpuCount") or 8)
        for cloud in ("secure", "community"):
            per_gpu = _price(t.get(f"{cloud}Price")) if t.get(f"{cloud}Cloud") else None
            spot = _price(t.get(f"{cloud}SpotPrice")) if t.get(f"{cloud}Cloud") else None
            if per_gpu is None and spot is None:
                continue
            for n in (c for c in COUNTS if c <= top):
                od = round(per_gpu * n, 6) if per_gpu else None
                sp = round(spot * n, 6) if spot else None
                offers.append(Offer(
                    provider="runpod", region="global", instance_type=f"{n}x_{gpu}_{cloud.upper()}", gpu=gpu,
                    gpu_count=n, gpu_vram_gb=gpu_spec(gpu).vram_gb, price_hour=od, spot_price_hour=sp,
                    currency="USD", price_hour_native=od, spot_price_hour_native=sp,
                    interconnect=gpu_spec(gpu).interconnect if n > 1 else None, source=SOURCE, as_of=as_of,
                ))
    return offers


@register
class RunpodSource:
    name: ClassVar[str] = "runpod"

    def __init__(self, api_key: str, url: str = API_URL, post: Callable[..., Any] | None = None) -> None:
        self.api_key = api_key
        self.url = url
        self.post = post or request_json

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> RunpodSource:
        key = setting(settings, "runpod_api_key", "RUNPOD_API_KEY")
        if not key:
            raise MissingCredentials("runpod", "RUNPOD_API_KEY is not set (RunPod's GraphQL API needs a key)")
        return cls(key, setting(settings, "runpod_api_url", "GPUCOST_RUNPOD_API_URL", API_URL) or API_URL)

    def fetch(self) -> RawSnapshot:
        now = datetime.now(UTC)
        answer = self.post("runpod", self.url, params={"api_key": self.api_key}, body={"query": QUERY})
        if isinstance(answer, dict) and answer.get("errors"):
            first = answer["errors"][0]
            raise ProviderError("runpod", f"GraphQL error: {first.get('message', first) if isinstance(first, dict) else first}")
        return RawSnapshot("runpod", now, {"gpu_types": answer})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return runpod_offers(raw.payloads, raw.fetched_at)
