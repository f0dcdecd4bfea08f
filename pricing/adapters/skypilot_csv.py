"""Import SkyPilot catalog files (``vms.csv``) as offers.

A path is either one ``vms.csv`` (its cloud is the parent folder's name) or a folder holding
``<cloud>/vms.csv``; folders without a ``vms.csv`` (``common/``) are skipped. Every row ends up
either in an offer or in the skip report under a reason, so ``rows == loaded + skipped`` per cloud.

Rules for the catalog's real quirks, each applied in one place below:

- GCP prices the accelerator (a row with an empty ``InstanceType``) apart from its host VM. A GPU
  VM costs host row + accelerator row in the same zone, paired as GCP sells them
  (``pricing.adapters.gcp.host_types_for``): A2/A3/A4/G2 types with their own GPUs, and T4/V100/
  P100/P4 on every N1 host within GCP's vCPU and memory limits for the GPU count, each pairing an
  offer of its own (the cheapest host that meets a job's needs is the one to rent). A host or
  accelerator row that pairs with nothing is skipped. A4 host rows are priced 0.0 because the B200 SKU carries the whole price: a host price
  of exactly 0 adds nothing instead of meaning "unknown".
- Elsewhere an empty, NaN or zero price means unknown (Vast writes 0.0 for every spot price). A row
  keeps if one of on-demand and spot is known.
- AWS zones are zone ids (``use1-az2``), kept as they are: ids name the same place in every
  account, zone names do not.
- Fractional GPU counts (AWS g6f: 0.25 L4) stay fractional, with the partition's memory.
- ``GpuInfo`` is a Python-repr dict (``ast.literal_eval``), or just the GPU's name. Its memory means
  per GPU on AWS and GCP, per GPU in ``TotalGpuMemoryInMiB`` on Lambda, and the whole instance
  on Vast.
- GPUs that ``optimizer.estimator.gpus`` knows take their canonical name and VRAM; unknown ones keep their
  upper-cased name with the VRAM from ``GpuInfo`` (skipped when it has none).
- Known catalog errors: Azure ``Standard_ND96isr_H100_v5`` says 12 GPUs (Microsoft documents 8);
  RunPod rows with spot above on-demand (the L40S rows) have the two swapped.
- Repeated (region, zone, instance type) rows keep the first (RunPod repeats 2x_B200 US rows).
  Distinct instance types are never merged, even when they share a GPU and a count (Lambda's
  H100 PCIe and SXM types stay two offers).
"""

from __future__ import annotations

import ast
import csv
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, ClassVar

from optimizer.estimator.gpus import find_gpu, gpu_spec
from optimizer.offer import Offer
from pricing.errors import MissingCredentials, ProviderError
from pricing.source import RawSnapshot, SourceSettings, register

MIB_TO_GB = 1.048576e-3
GIB_TO_GB = 1.073741824

# Microsoft documents the ND H100 v5 series with 8 H100 GPUs per VM (learn.microsoft.com,
# "ND H100 v5 sizes series").
_COUNT_FIXES: dict[tuple[str, str], float] = {("azure", "Standard_ND96isr_H100_v5"): 8.0}


@dataclass
class CloudReport:
    rows: int = 0
    loaded_rows: int = 0
    offers: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    fixed: Counter[str] = field(default_factory=Counter)


@dataclass
class ImportReport:
    clouds: dict[str, CloudReport] = field(default_factory=dict)

    def cloud(self, name: str) -> CloudReport:
        return self.clouds.setdefault(name, CloudReport())

    @property
    def skipped(self) -> dict[str, int]:
        """Skipped rows by reason, summed over clouds."""
        total: Counter[str] = Counter()
        for rep in self.clouds.values():
            total.update(rep.skipped)
        return dict(total)

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.clouds.values())

    @property
    def loaded_rows(self) -> int:
        return sum(r.loaded_rows for r in self.clouds.values())


def _num(text: str | None) -> float | None:
    """A CSV cell as a float; empty, NaN, infinite and unparsable cells are None."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    # inf/-inf are unparsable as amounts too: they would become infinite prices or counts.
    return value if math.isfinite(value) else None


def _price(text: str | None) -> float | None:
    value = _num(text)
    return value if value is not None and value > 0 else None


def _gpu_info(text: str | None) -> dict[str, Any] | None:
    if not text or not text.strip().startswith("{"):
        return None
    try:
        info = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return info if isinstance(info, dict) else None


def _info_mib(info: dict[str, Any] | None, cloud: str, count: float) -> float | None:
    """Per-GPU (or per-partition) memory in MiB from a GpuInfo dict, by each cloud's convention."""
    if not info:
        return None
    if cloud == "lambda":
        total = info.get("TotalGpuMemoryInMiB")
        return float(total) if total else None
    gpus = info.get("Gpus") or []
    size = gpus[0].get("MemoryInfo", {}).get("SizeInMiB") if gpus else None
    if not size:
        return None
    if cloud == "vast" and count >= 1:
        return float(size) / count
    return float(size)


def _gpu_name(raw: str, instance_type: str) -> tuple[str, bool]:
    """(name, known): canonical when optimizer.estimator.gpus knows it, else the upper-cased raw name."""
    canon = find_gpu(raw)
    if canon is None:
        return raw.strip().upper(), False
    if "pcie" in instance_type.lower():
        # Lambda sells H100 PCIe and SXM under one accelerator name; the type name tells them apart.
        pcie = find_gpu(f"{raw} PCIe")
        if pcie is not None:
            return pcie, True
    return canon, True


def _vram_gb(
    gpu: str, known: bool, count: float, info: dict[str, Any] | None, cloud: str
) -> float | None:
    if known and count >= 1:
        return gpu_spec(gpu).vram_gb
    mib = _info_mib(info, cloud, count)
    return round(mib * MIB_TO_GB, 2) if mib else None


def _interconnect(gpu: str, known: bool, count: float) -> str | None:
    """Between the GPUs of one instance: the GPU's own link (NVLink on SXM parts), when known."""
    return gpu_spec(gpu).interconnect if known and count > 1 else None


def _ram_gb(gib: float | None) -> float | None:
    return round(gib * GIB_TO_GB, 2) if gib else None


def _as_of(value: datetime | date | None) -> datetime:
    if value is None:
        value = datetime.now(UTC).date()
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def _offers_generic(
    cloud: str, rows: list[dict[str, str]], source: str, as_of: datetime, rep: CloudReport
) -> list[Offer]:
    offers: list[Offer] = []
    seen: set[tuple[str, str, str, str]] = set()
    for row in rows:
        rep.rows += 1
        raw_gpu = (row.get("AcceleratorName") or "").strip()
        instance_type = (row.get("InstanceType") or "").strip()
        if not raw_gpu:
            rep.skipped["no GPU (CPU-only row)"] += 1
            continue
        if not instance_type:
            rep.skipped["no instance type"] += 1
            continue
        count = _num(row.get("AcceleratorCount"))
        fixed_count = _COUNT_FIXES.get((cloud, instance_type))
        if fixed_count is not None and count != fixed_count:
            count = fixed_count
            rep.fixed["GPU count corrected"] += 1
        if count is None or count <= 0:
            rep.skipped["no GPU count"] += 1
            continue
        price = _price(row.get("Price"))
        spot = _price(row.get("SpotPrice"))
        if cloud == "runpod" and price and spot and spot > price:
            price, spot = spot, price
            rep.fixed["spot and on-demand swapped"] += 1
        if price is None and spot is None:
            rep.skipped["no price (empty, NaN or 0)"] += 1
            continue
        gpu, known = _gpu_name(raw_gpu, instance_type)
        info = _gpu_info(row.get("GpuInfo"))
        vram = _vram_gb(gpu, known, count, info, cloud)
        if vram is None:
            rep.skipped["GPU memory unknown"] += 1
            continue
        region = (row.get("Region") or "").strip()
        if not region:
            rep.skipped["no region"] += 1
            continue
        zone = (row.get("AvailabilityZone") or "").strip() or None
        key = (cloud, region, zone or "", instance_type)
        if key in seen:
            rep.skipped["duplicate row"] += 1
            continue
        seen.add(key)
        offers.append(
            Offer(
                provider=cloud,
                region=region,
                zone=zone,
                instance_type=instance_type,
                gpu=gpu,
                gpu_count=count,
                gpu_vram_gb=vram,
                vcpus=_num(row.get("vCPUs")),
                ram_gb=_ram_gb(_num(row.get("MemoryGiB"))),
                price_hour=price,
                spot_price_hour=spot,
                currency="USD",
                price_hour_native=price,
                spot_price_hour_native=spot,
                interconnect=_interconnect(gpu, known, count),
                source=source,
                as_of=as_of,
            )
        )
        rep.loaded_rows += 1
    return offers


def _host_cost(text: str | None) -> float | None:
    """A GCP host price: 0.0 is a real zero (the A4 bundle), empty/NaN is unknown."""
    value = _num(text)
    return value if value is not None and value >= 0 else None


def _offers_gcp(
    rows: list[dict[str, str]], source: str, as_of: datetime, rep: CloudReport
) -> list[Offer]:
    from pricing.adapters.gcp import combined_instance_type, host_types_for

    hosts: dict[tuple[str, str], tuple[int, dict[str, str]]] = {}
    accels: list[tuple[int, dict[str, str]]] = []
    used: set[int] = set()
    for i, row in enumerate(rows):
        rep.rows += 1
        if (row.get("AcceleratorName") or "").strip():
            accels.append((i, row))
        elif (row.get("InstanceType") or "").strip():
            key = ((row.get("AvailabilityZone") or "").strip(), row["InstanceType"].strip())
            if key in hosts:
                rep.skipped["duplicate row"] += 1
                continue
            hosts[key] = (i, row)
        else:
            rep.skipped["no instance type"] += 1

    offers: list[Offer] = []
    seen: set[tuple[str, str, str]] = set()
    for i, acc in accels:
        raw_gpu = acc["AcceleratorName"].strip()
        count = _num(acc.get("AcceleratorCount"))
        zone = (acc.get("AvailabilityZone") or "").strip()
        region = (acc.get("Region") or "").strip()
        if count is None or count <= 0:
            rep.skipped["no GPU count"] += 1
            continue
        gpu, known = _gpu_name(raw_gpu, "")
        vram = _vram_gb(gpu, known, count, _gpu_info(acc.get("GpuInfo")), "gcp")
        if vram is None:
            rep.skipped["GPU memory unknown"] += 1
            continue
        acc_price, acc_spot = _price(acc.get("Price")), _price(acc.get("SpotPrice"))
        made = 0
        for host_type in host_types_for(raw_gpu, int(count)):
            found = hosts.get((zone, host_type))
            if found is None:
                continue
            j, host = found
            host_price, host_spot = _host_cost(host.get("Price")), _host_cost(host.get("SpotPrice"))
            price = acc_price + host_price if acc_price and host_price is not None else None
            spot = acc_spot + host_spot if acc_spot and host_spot is not None else None
            if price is None and spot is None:
                continue
            instance_type = combined_instance_type(host_type, raw_gpu, int(count))
            if (region, zone, instance_type) in seen:
                continue
            seen.add((region, zone, instance_type))
            offers.append(
                Offer(
                    provider="gcp",
                    region=region,
                    zone=zone or None,
                    instance_type=instance_type,
                    gpu=gpu,
                    gpu_count=count,
                    gpu_vram_gb=vram,
                    vcpus=_num(host.get("vCPUs")),
                    ram_gb=_ram_gb(_num(host.get("MemoryGiB"))),
                    price_hour=round(price, 6) if price else None,
                    spot_price_hour=round(spot, 6) if spot else None,
                    currency="USD",
                    price_hour_native=round(price, 6) if price else None,
                    spot_price_hour_native=round(spot, 6) if spot else None,
                    interconnect=_interconnect(gpu, known, count),
                    source=source,
                    as_of=as_of,
                )
            )
            used.add(j)
            made += 1
        if made:
            rep.loaded_rows += 1
        elif acc_price is None and acc_spot is None:
            rep.skipped["no price (empty, NaN or 0)"] += 1
        else:
            rep.skipped["gcp accelerator without a host in its zone"] += 1
    for i, _row in hosts.values():
        if i in used:
            rep.loaded_rows += 1
        else:
            rep.skipped["gcp host not paired with an accelerator"] += 1
    return offers


def parse_vms_csv(
    cloud: str, text: str, source: str, as_of: datetime, report: ImportReport
) -> list[Offer]:
    """Offers from the text of one ``vms.csv``; pure."""
    rows = list(csv.DictReader(text.splitlines()))
    rep = report.cloud(cloud)
    if cloud == "gcp":
        offers = _offers_gcp(rows, source, as_of, rep)
    else:
        offers = _offers_generic(cloud, rows, source, as_of, rep)
    rep.offers += len(offers)
    return offers


def catalog_files(path: Path) -> dict[str, Path]:
    """``{cloud: vms.csv path}`` for a file or a folder of ``<cloud>/vms.csv``."""
    path = Path(path)
    if path.is_file():
        return {path.parent.name.lower(): path}
    if not path.is_dir():
        raise FileNotFoundError(f"no SkyPilot catalog at {path}")
    return {
        sub.name.lower(): sub / "vms.csv"
        for sub in sorted(path.iterdir())
        if sub.is_dir() and (sub / "vms.csv").is_file()
    }


def _source_label(cloud: str) -> str:
    return f"skypilot-catalog:{cloud}/vms.csv"


def offers_from_texts(
    texts: dict[str, str], as_of: datetime | date | None = None
) -> tuple[list[Offer], ImportReport]:
    """Offers from ``{cloud: vms.csv text}``; pure."""
    stamp = _as_of(as_of)
    report = ImportReport()
    offers: list[Offer] = []
    for cloud, text in texts.items():
        offers.extend(parse_vms_csv(cloud, text, _source_label(cloud), stamp, report))
    return offers, report


def load_skypilot_report(
    path: Path, as_of: datetime | date | None = None
) -> tuple[list[Offer], ImportReport]:
    """Offers and the per-cloud report (rows, loaded rows, skipped rows by reason)."""
    texts = {c: p.read_text(encoding="utf-8") for c, p in catalog_files(path).items()}
    return offers_from_texts(texts, as_of)


def load_skypilot(path: Path, as_of: datetime | date | None = None) -> list[Offer]:
    """Offers from a ``vms.csv`` or a folder of ``<cloud>/vms.csv``; ``as_of``: the catalog's date
    (today when not given)."""
    return load_skypilot_report(path, as_of)[0]


@register
class SkypilotSource:
    """A local SkyPilot catalog folder (``settings.skypilot_dir``) as a price source.

    ``settings.extra["skypilot_as_of"]`` (ISO date) dates the catalog; otherwise the fetch date.
    """

    name: ClassVar[str] = "skypilot"

    def __init__(self, path: Path, as_of: datetime | date | None = None) -> None:
        self.path = Path(path)
        self.as_of = as_of

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> SkypilotSource:
        if not settings.skypilot_dir:
            raise MissingCredentials("skypilot", "no skypilot_dir configured")
        stamp = settings.extra.get("skypilot_as_of")
        as_of = date.fromisoformat(stamp) if isinstance(stamp, str) else stamp
        return cls(Path(settings.skypilot_dir), as_of)

    def fetch(self) -> RawSnapshot:
        try:
            texts = {c: p.read_text(encoding="utf-8") for c, p in catalog_files(self.path).items()}
        except OSError as exc:
            raise ProviderError("skypilot", f"cannot read {self.path}: {exc}", False) from exc
        if not texts:
            raise ProviderError("skypilot", f"no <cloud>/vms.csv under {self.path}", False)
        fetched_at = datetime.now(UTC)
        return RawSnapshot(
            "skypilot",
            fetched_at,
            {"texts": texts, "as_of": _as_of(self.as_of or fetched_at).isoformat()},
        )

    def parse(self, raw: RawSnapshot) -> list[Offer]:
        as_of = datetime.fromisoformat(raw.payloads["as_of"])
        return offers_from_texts(raw.payloads["texts"], as_of)[0]
