"""Vast.ai marketplace offers from its search API (``VAST_API_KEY`` is sent when set; offer search
answers without one).

``POST https://console.vast.ai/api/v0/bundles/`` with a query of ``{"field": {"op": value}}``
filters answers ``{"offers": [{"id", "machine_id", "gpu_name", "num_gpus", "gpu_ram" (MB),
"cpu_cores_effective", "cpu_ram" (MB), "dph_total" (USD per hour, all the offer's GPUs),
"min_bid", "geolocation", "verified", "rentable", "rented", "reliability2", ...}]}`` (Vast.ai API
reference, https://docs.vast.ai/api-reference/search/search-offers, read 2026-12-01). A marketplace
lists thousands of machines; one offer is kept per GPU model, GPU count and location: the cheapest
verified machine that can be rented now, with its host's vCPUs and RAM. ``min_bid`` (interruptible)
is its spot price.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import gpu_spec
from optimizer.offer import Offer
from pricing.adapters._gpu_names import canonical_gpu
from pricing.adapters._http import request_json, setting
from pricing.source import RawSnapshot, SourceSettings, register

API_URL = "https://console.vast.ai/api/v0/bundles/"
SOURCE = "vast:console.vast.ai/api/v0/bundles (cheapest verified offer per GPU, count and location)"
QUERY: dict[str, Any] = {
    "verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False},
    "num_gpus": {"gte": 1}, "type": "on-demand", "limit": 5000,
}
_MB_TO_GB = 1e-3 * 1.048576  # Vast reports MiB as "MB"


def _num(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x > 0 else None


def vast_offers(payloads: dict[str, Any], as_of: datetime) -> list[Offer]:
    """One offer per (GPU, count, location): the cheapest machine; pure."""
    best: dict[tuple[str, int, str], dict[str, Any]] = {}
    for o in (payloads.get("bundles", {}) or {}).get("offers") or []:
        if not isinstance(o, dict) or o.get("rented") or o.get("rentable") is False or o.get("verified") is False:
            continue
        price, count = _num(o.get("dph_total")), int(_num(o.get("num_gpus")) or 0)
        vram = _num(o.get("gpu_ram"))
        gpu = canonical_gpu(str(o.get("gpu_name") or ""), vram * _MB_TO_GB if vram else None)
        if price is None or count <= 0 or gpu is None:
            continue
        key = (gpu, count, str(o.get("geolocation") or "unknown"))
        if key not in best or price < best[key]["_price"]:
            best[key] = {**o, "_price": price}
    offers = []
    for (gpu, count, where), o in sorted(best.items()):
        ram = _num(o.get("cpu_ram"))
        spot = _num(o.get("min_bid"))
        offers.append(Offer(
            provider="vast", region=where, instance_type=f"{count}x-{gpu}", gpu=gpu, gpu_count=count,
            gpu_vram_gb=gpu_spec(gpu).vram_gb, vcpus=_num(o.get("cpu_cores_effective")),
            ram_gb=round(ram * _MB_TO_GB, 2) if ram else None, price_hour=o["_price"],
            spot_price_hour=spot if spot is not None and spot < o["_price"] else None, currency="USD",
            price_hour_native=o["_price"], spot_price_hour_native=spot if spot is not None and spot < o["_price"] else None,
            interconnect=gpu_spec(gpu).interconnect if count > 1 else None,
            source=f"{SOURCE}; machine {o.get('machine_id', '?')}", as_of=as_of,
        ))
    return offers


@register
class VastSource:
    name: ClassVar[str] = "vast"

    def __init__(self, api_key: str | None = None, url: str = API_URL, post: Callable[..., Any] | None = None) -> None:
        self.api_key = api_key
        self.url = url
        self.post = post or request_json

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> VastSource:
        return cls(setting(settings, "vast_api_key", "VAST_API_KEY"),
                   setting(settings, "vast_api_url", "GPUCOST_VAST_API_URL", API_URL) or API_URL)

    def fetch(self) -> RawSnapshot:
        now = datetime.now(UTC)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        answer = self.post("vast", self.url, headers=headers, body=QUERY)
        return RawSnapshot("vast", now, {"bundles": answer})

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        return vast_offers(raw.payloads, raw.fetched_at)
