"""Google Cloud GPU VMs: shapes from Compute Engine, prices from the Cloud Billing Catalog.

GCP bills a GPU VM as parts: the GPUs (one SKU per GPU model and region) plus the host's vCPUs and
RAM (one SKU each per machine family and region). ``fetch`` reads which accelerators and machine
types exist in which zones (``AcceleratorTypesClient`` / ``MachineTypesClient`` aggregated lists)
and the Compute Engine SKUs (``CloudCatalogClient.list_skus``, service 6F81-5844-456A); ``parse``
prices each shape: GPUs x GPU SKU + vCPUs x core SKU + GiB x RAM SKU, on demand and on Spot.

A2/A3/A4/G2 machine types carry their GPUs; T4, V100, P100 and P4 attach to any N1 host within
GCP's vCPU and memory limits for that GPU count (``host_types_for``), and each such pairing is an
offer of its own, so a job that needs few vCPUs can take the smallest host. A shape whose parts are not all priced in its region is left out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar

from optimizer.estimator.gpus import find_gpu, gpu_spec
from optimizer.offer import Offer
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings, register

COMPUTE_SERVICE = "services/6F81-5844-456A"

# Compute Engine accelerator type -> SkyPilot accelerator name. "-vws" (virtual workstation)
# types are the same GPUs sold with a graphics licence, so they are not listed.
GCP_ACCELERATORS: dict[str, str] = {
    "nvidia-tesla-a100": "A100",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100-MEGA",
    "nvidia-h200-141gb": "H200",
    "nvidia-b200": "B200",
    "nvidia-l4": "L4",
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-p100": "P100",
    "nvidia-tesla-p4": "P4",
}

# GPUs that attach to N1 hosts rather than coming with their machine type.
N1_ATTACHED = ("T4", "V100", "P100", "P4")

# Billing Catalog GPU SKU model text ("Nvidia <model> GPU running in ...") -> SkyPilot name.
_SKU_GPU_MODELS: dict[str, str] = {
    "TESLA A100": "A100",
    "A100 40GB": "A100",
    "TESLA A100 80GB": "A100-80GB",
    "A100 80GB": "A100-80GB",
    "H100 80GB": "H100",
    "H100 80GB MEGA": "H100-MEGA",
    "H100 MEGA 80GB": "H100-MEGA",
    "H200 141GB": "H200",
    "B200": "B200",
    "L4": "L4",
    "TESLA T4": "T4",
    "TESLA V100": "V100",
    "TESLA P100": "P100",
    "TESLA P4": "P4",
}
_GPU_SKU = re.compile(
    r"^(?:Spot Preemptible |Preemptible )?Nvidia (.+?) GPU "
    r"(?:attached to (?:Spot )?Preemptible VMs )?running in ",
    re.I,
)
_HOST_SKU = re.compile(
    r"^(?:Spot Preemptible |Preemptible )?(A2|A3 Mega|A3 Ultra|A3 Edge|A3|A4|G2|N1 Predefined) "
    r"Instance (Core|Ram) running in ",
    re.I,
)


# GCP's limits for GPUs attached to N1 machine types: GPU count -> (max vCPUs, max memory GB) per
# VM (cloud.google.com/compute/docs/gpus, "GPU machine types", N1 general-purpose tables; GCP's
# "GB" here are GiB). P100 with 4 GPUs allows 96 vCPUs only in some zones: the common limit is kept.
N1_LIMITS: dict[str, dict[int, tuple[int, float]]] = {
    "T4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
    "P4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "V100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
    "P100": {1: (16, 104), 2: (32, 208), 4: (64, 208)},
}
# N1 shapes: vCPU counts and GiB per vCPU by kind (n1-standard 3.75, n1-highmem 6.5, n1-highcpu 0.9).
N1_VCPUS = (1, 2, 4, 8, 16, 32, 64, 96)
N1_GIB_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}


def n1_host_types(accelerator: str, count: int) -> list[str]:
    """Every N1 machine type that can carry ``count`` GPUs of ``accelerator``, smallest first."""
    limit = N1_LIMITS.get(accelerator, {}).get(count)
    if limit is None:
        return []
    max_vcpus, max_gib = limit
    hosts = [
        (vcpus, kind)
        for kind, gib_per_vcpu in N1_GIB_PER_VCPU.items()
        for vcpus in N1_VCPUS
        if vcpus <= max_vcpus
        and vcpus * gib_per_vcpu <= max_gib
        # n1-highcpu starts at 2 vCPUs and n1-highmem at 2; n1-standard-1 exists.
        and not (vcpus == 1 and kind != "standard")
    ]
    return [f"n1-{kind}-{vcpus}" for vcpus, kind in sorted(hosts)]


def host_types_for(accelerator: str, count: int) -> list[str]:
    """Machine types that carry ``count`` GPUs of SkyPilot name ``accelerator``, as GCP sells them.

    A2/A3/A4/G2 types come with their GPUs; T4/V100/P100/P4 attach to every N1 shape within
    GCP's per-GPU-count limits, each a separate priced offer: the cheapest one that meets the
    job's host needs is the one to rent.
    """
    built_in = {
        "A100": {1: ["a2-highgpu-1g"], 2: ["a2-highgpu-2g"], 4: ["a2-highgpu-4g"],
                 8: ["a2-highgpu-8g"], 16: ["a2-megagpu-16g"]},
        "A100-80GB": {n: [f"a2-ultragpu-{n}g"] for n in (1, 2, 4, 8)},
        "H100": {1: ["a3-highgpu-1g"], 2: ["a3-highgpu-2g"], 4: ["a3-highgpu-4g"],
                 8: ["a3-highgpu-8g", "a3-edgegpu-8g", "a3-edgegpu-8g-nolssd"]},
        "H100-MEGA": {8: ["a3-megagpu-8g"]},
        "H200": {8: ["a3-ultragpu-8g", "a3-ultragpu-8g-nolssd"]},
        "B200": {8: ["a4-highgpu-8g"]},
        "L4": {1: ["g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16",
                   "g2-standard-32"],
               2: ["g2-standard-24"], 4: ["g2-standard-48"], 8: ["g2-standard-96"]},
    }
    if accelerator in built_in:
        return built_in[accelerator].get(count, [])
    return n1_host_types(accelerator, count)


def combined_instance_type(host: str, accelerator: str, count: int) -> str:
    """Name of a priced shape: the machine type, plus the attached GPUs for N1 hosts."""
    if host.startswith("n1-"):
        return f"{host}+{count}x{accelerator}"
    return host


def _host_family(machine_type: str) -> str:
    prefix = machine_type.split("-")[0]
    if prefix == "a3":
        for word, family in (("mega", "a3 mega"), ("ultra", "a3 ultra"), ("edge", "a3 edge")):
            if f"-{word}gpu" in machine_type:
                return family
    if prefix == "n1":
        return "n1 predefined"
    return prefix


def _money(price: dict[str, Any]) -> float:
    return int(price.get("units") or 0) + int(price.get("nanos") or 0) / 1e9


def _sku_rate(sku: dict[str, Any]) -> tuple[float, str] | None:
    """(USD per usage unit, usage unit) of a SKU's current list price."""
    infos = sku.get("pricing_info") or []
    if not infos:
        return None
    expr = infos[0].get("pricing_expression") or {}
    for tier in expr.get("tiered_rates") or []:
        unit_price = tier.get("unit_price") or {}
        if (unit_price.get("currency_code") or "USD") != "USD":
            return None
        value = _money(unit_price)
        if value > 0:
            return value, expr.get("usage_unit", "")
    return None


SkuTable = dict[tuple[str, str, str, bool], float]  # (kind, name, region, spot) -> USD/h per unit


def sku_table(skus: Iterable[dict[str, Any]]) -> SkuTable:
    """``(("gpu", "A100") | ("core" | "ram", family), region, spot) -> USD per GPU-h / vCPU-h /
    GiB-h`` from Billing Catalog SKUs; committed-use and other usage types are ignored."""
    table: SkuTable = {}
    for sku in skus:
        category = sku.get("category") or {}
        usage = category.get("usage_type", "")
        if usage not in ("OnDemand", "Preemptible"):
            continue
        spot = usage == "Preemptible"
        description = sku.get("description", "")
        rate = _sku_rate(sku)
        if rate is None:
            continue
        value, unit = rate
        gpu_match = _GPU_SKU.match(description)
        host_match = _HOST_SKU.match(description)
        if gpu_match and unit == "h":
            model = _SKU_GPU_MODELS.get(gpu_match.group(1).upper())
            if model is None:
                continue
            key: tuple[str, str] = ("gpu", model)
        elif host_match:
            part = "core" if host_match.group(2).lower() == "core" else "ram"
            if (part, unit) not in (("core", "h"), ("ram", "GiBy.h")):
                continue
            key = (part, host_match.group(1).lower())
        else:
            continue
        for region in sku.get("service_regions") or []:
            table[(key[0], key[1], region, spot)] = value
    return table


def _shape_price(
    table: SkuTable, region: str, family: str, gpu: str, count: int, vcpus: float,
    ram_gib: float, spot: bool,
) -> float | None:
    parts = (
        table.get(("gpu", gpu, region, spot)),
        table.get(("core", family, region, spot)),
        table.get(("ram", family, region, spot)),
    )
    if any(p is None for p in parts):
        return None
    gpu_rate, core_rate, ram_rate = parts
    total = count * gpu_rate + vcpus * core_rate + ram_gib * ram_rate  # type: ignore[operator]
    return round(total, 6)


def _basename(link: str) -> str:
    return link.rstrip("/").rsplit("/", 1)[-1]


def _region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def gcp_offers(
    accelerator_types: list[dict[str, Any]],
    machine_types: list[dict[str, Any]],
    skus: list[dict[str, Any]],
    regions: Iterable[str] | None,
    as_of: datetime,
) -> list[Offer]:
    """Priced GPU shapes per zone; pure."""
    wanted = set(regions) if regions else None
    table = sku_table(skus)
    by_zone: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for mt in machine_types:
        zone = _basename(mt.get("zone", ""))
        if zone and (wanted is None or _region_of(zone) in wanted):
            by_zone[zone][mt["name"]] = mt
    attachable: dict[str, dict[str, int]] = defaultdict(dict)
    for at in accelerator_types:
        zone = _basename(at.get("zone", ""))
        name = GCP_ACCELERATORS.get(at.get("name", ""))
        if zone and name in N1_ATTACHED:
            attachable[zone][name] = int(at.get("maximum_cards_per_instance") or 0)

    source = f"gcp-billing-catalog:{COMPUTE_SERVICE}"
    offers: list[Offer] = []

    def add(zone: str, host: dict[str, Any], accel: str, count: int) -> None:
        region = _region_of(zone)
        gpu = find_gpu(accel)
        if gpu is None:
            return
        vcpus = float(host.get("guest_cpus") or 0)
        ram_gib = float(host.get("memory_mb") or 0) / 1024
        family = _host_family(host["name"])
        price = _shape_price(table, region, family, accel, count, vcpus, ram_gib, spot=False)
        spot = _shape_price(table, region, family, accel, count, vcpus, ram_gib, spot=True)
        if price is None and spot is None:
            return
        offers.append(
            Offer(
                provider="gcp",
                region=region,
                zone=zone,
                instance_type=combined_instance_type(host["name"], accel, count),
                gpu=gpu,
                gpu_count=count,
                gpu_vram_gb=gpu_spec(gpu).vram_gb,
                vcpus=vcpus,
                ram_gb=round(ram_gib * 1.073741824, 2),
                price_hour=price,
                spot_price_hour=spot,
                currency="USD",
                price_hour_native=price,
                spot_price_hour_native=spot,
                # GCP bills per second after the first minute.
                billing_increment_s=1,
                min_billing_s=60,
                interconnect=gpu_spec(gpu).interconnect if count > 1 else None,
                source=source,
                as_of=as_of,
            )
        )

    for zone in sorted(by_zone):
        machines = by_zone[zone]
        for host in machines.values():
            for acc in host.get("accelerators") or []:
                accel = GCP_ACCELERATORS.get(acc.get("guest_accelerator_type", ""))
                count = int(acc.get("guest_accelerator_count") or 0)
                if accel and count > 0:
                    add(zone, host, accel, count)
        for accel, max_cards in sorted(attachable.get(zone, {}).items()):
            for count in (1, 2, 4, 8):
                if count > max_cards:
                    continue
                for host_name in host_types_for(accel, count):
                    if host_name in machines:
                        add(zone, machines[host_name], accel, count)
    return offers


def _provider_error(exc: Exception) -> ProviderError:
    from google.api_core import exceptions as gexc

    retriable = isinstance(
        exc,
        (
            gexc.TooManyRequests,
            gexc.ResourceExhausted,
            gexc.ServiceUnavailable,
            gexc.DeadlineExceeded,
            gexc.InternalServerError,
            gexc.RetryError,
            TimeoutError,
        ),
    )
    return ProviderError("gcp", f"{type(exc).__name__}: {exc}", retriable)


def gcp_credentials(settings: Any) -> tuple[Any, str]:
    """Application-default credentials and the project to read (``gcp_project`` wins), or
    MissingCredentials so that a refresh skips GCP and says why."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, project = google.auth.default()
    except DefaultCredentialsError as exc:
        raise MissingCredentials("gcp", str(exc)) from exc
    project = settings.gcp_project or project
    if not project:
        raise MissingCredentials("gcp", "no project: set gcp_project or a default project")
    return credentials, project


@register
class GcpSource:
    name: ClassVar[str] = "gcp"

    def __init__(
        self,
        project: str,
        regions: Iterable[str],
        accelerator_client: Any,
        machine_client: Any,
        catalog_client: Any,
    ) -> None:
        self.project = project
        self.regions = tuple(regions)
        self.accelerator_client = accelerator_client
        self.machine_client = machine_client
        self.catalog_client = catalog_client

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> GcpSource:
        from google.cloud import billing_v1, compute_v1

        credentials, project = gcp_credentials(settings)
        return cls(
            project,
            settings.gcp_regions,
            compute_v1.AcceleratorTypesClient(credentials=credentials),
            compute_v1.MachineTypesClient(credentials=credentials),
            billing_v1.CloudCatalogClient(credentials=credentials),
        )

    def _aggregated(self, client: Any, field: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        # The pager walks every page; each item is (scope, scoped list).
        for _scope, scoped in client.aggregated_list(request=request):
            for item in getattr(scoped, field):
                items.append(type(item).to_dict(item, preserving_proto_field_name=True))
        return items

    def fetch(self) -> RawSnapshot:
        from google.api_core import exceptions as gexc

        try:
            accelerators = self._aggregated(
                self.accelerator_client, "accelerator_types", {"project": self.project}
            )
            machines = self._aggregated(
                self.machine_client,
                "machine_types",
                {
                    "project": self.project,
                    "filter": 'name eq "(a2|a3|a4|g2|n1-highmem|n1-standard)-.*"',
                },
            )
            skus = []
            for sku in self.catalog_client.list_skus(request={"parent": COMPUTE_SERVICE}):
                data = type(sku).to_dict(sku, preserving_proto_field_name=True)
                if _GPU_SKU.match(data.get("description", "")) or _HOST_SKU.match(
                    data.get("description", "")
                ):
                    skus.append(data)
        except (gexc.GoogleAPIError, TimeoutError) as exc:
            raise _provider_error(exc) from exc
        return RawSnapshot(
            "gcp",
            datetime.now(UTC),
            {
                "accelerator_types": accelerators,
                "machine_types": machines,
                "skus": skus,
                "regions": list(self.regions),
            },
        )

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        p = raw.payloads
        return gcp_offers(
            p["accelerator_types"], p["machine_types"], p["skus"], p.get("regions"), raw.fetched_at
        )
