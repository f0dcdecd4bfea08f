"""Local builds: a dated parts catalog assembled into machines one can buy.

Rules (from the seed guides, plus a power model):
- Power at load = GPU TDP x count + CPU TDP + 150 W for board, fans, memory and storage (the
  allowance Corsair's PSU guide gives). The PSU is the cheapest one rated at least
  ``psu_headroom`` x that load (1.3 by default: transient spikes and efficiency).
- Idle power is not measured in any source we have: it is modelled as ``IDLE_FRACTION`` of load.
- ``balanced_build`` scales the rest to the GPUs: RAM >= max(32 GB, ``ram_per_vram`` x total
  VRAM), CPU >= 8 cores / 16 threads and >= ``cores_per_gpu`` cores per GPU (DataLoader
  workers), an NVMe drive, a board with a slot per GPU.
- Resale: a GPU keeps ``exp(-k * age_months)`` of its launch price, ``k`` fitted on the dated
  launch vs used prices in the catalog (per GPU where it has such a pair, pooled otherwise). Only
  GPUs are assumed to resell; other parts are counted at nothing (no used-price evidence).
- Where parts share a name, the newest dated price is the current one.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from importlib import resources
from itertools import product
from pathlib import Path
from typing import Any, ClassVar

import yaml

from optimizer.errors import InvalidInput, UnsupportedConfig
from optimizer.estimator.gpus import canonical_gpu, gpu_spec
from optimizer.offer import LocalBuild, Part
from pricing.adapters.autodl import parse_price
from pricing.currency import to_usd
from pricing.source import RawSnapshot, SourceSettings, register

REST_OF_SYSTEM_W = 150.0  # Corsair "Choosing your PSU": board, fans, memory, storage
IDLE_FRACTION = 0.15  # assumption: no measured idle figure in the sources
DEFAULT_LIFETIME_MONTHS = 36
DAYS_PER_MONTH = 365.25 / 12


@dataclass(frozen=True, slots=True)
class Electricity:
    region: str
    usd_per_kwh: float
    source: str
    as_of: date


def _data_text(name: str) -> str:
    return resources.files("pricing.snapshot").joinpath(f"data/{name}").read_text("utf-8")


def _specs(text: str) -> dict[str, float | str]:
    specs: dict[str, float | str] = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        key, _, value = item.partition("=")
        try:
            specs[key.strip()] = float(value)
        except ValueError:
            specs[key.strip()] = value.strip()
    return specs


def parts_from_csv(text: str) -> list[Part]:
    """Pure: parts.csv text -> parts; ranges ("500-800") take their midpoint, said in the source."""
    parts: list[Part] = []
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        price, was_range = parse_price(row["price"])
        currency = row["currency"].strip().upper()
        source = row["source"] + (f" [range {row['price']} {currency}: midpoint]" if was_range else "")
        specs = _specs(row.get("specs") or "")
        if row["category"] == "gpu":
            specs["gpu"] = canonical_gpu(str(specs.get("gpu", "")))
        parts.append(
            Part(
                id=row["id"],
                category=row["category"],
                name=row["name"],
                price_usd=round(to_usd(price, currency), 2),
                currency=currency,
                price_native=price,
                condition=row["condition"],
                source=source,
                as_of=datetime.fromisoformat(row["as_of"]).replace(tzinfo=UTC),
                specs=specs,
            )
        )
    ids = [p.id for p in parts]
    if len(ids) != len(set(ids)):
        raise InvalidInput("parts", "duplicate part ids")
    return parts


def electricity_from_csv(text: str) -> dict[str, Electricity]:
    table: dict[str, Electricity] = {}
    for row in csv.DictReader(io.StringIO(text)):
        table[row["region"]] = Electricity(
            region=row["region"],
            # At the rate of the price's own date.
            usd_per_kwh=round(to_usd(float(row["price_per_kwh"]), row["currency"],
                                     on=date.fromisoformat(row["date"])), 6),
            source=f"{row['source']} ({row['notes']})",
            as_of=date.fromisoformat(row["date"]),
        )
    return table


@lru_cache(maxsize=1)
def bundled_parts() -> tuple[Part, ...]:
    return tuple(parts_from_csv(_data_text("parts.csv")))


@lru_cache(maxsize=1)
def bundled_electricity() -> dict[str, Electricity]:
    return electricity_from_csv(_data_text("electricity.csv"))


def current_parts(parts: Iterable[Part]) -> list[Part]:
    """Drop prices superseded by a newer one for the same part name."""
    newest: dict[tuple[str, str], Part] = {}
    for p in parts:
        key = (p.category, p.name)
        if key not in newest or p.as_of > newest[key].as_of:
            newest[key] = p
    return list(newest.values())


# --- resale curve -------------------------------------------------------------------------------


def _months_between(a: datetime, b: datetime) -> float:
    return (b - a).days / DAYS_PER_MONTH


def resale_points(parts: Iterable[Part]) -> dict[str, list[tuple[float, float]]]:
    """Per GPU: (age in months, used price / launch price) from the catalog's dated prices."""
    gpus = [p for p in parts if p.category == "gpu"]
    points: dict[str, list[tuple[float, float]]] = {}
    for launch in (p for p in gpus if p.condition == "msrp"):
        for used in (p for p in gpus if p.condition == "used" and p.specs["gpu"] == launch.specs["gpu"]):
            age = _months_between(launch.as_of, used.as_of)
            if age > 0:
                points.setdefault(str(launch.specs["gpu"]), []).append((age, used.price_usd / launch.price_usd))
    return points


def _decay_rate(points: Sequence[tuple[float, float]]) -> float:
    # Least squares of ln(fraction) = -k * age through the origin (a new card is worth its price).
    den = sum(age * age for age, _ in points)
    return -sum(age * math.log(frac) for age, frac in points) / den


def resale_fraction(gpu: str, age_months: float, parts: Iterable[Part] | None = None) -> float:
    """Share of a GPU's launch price it fetches used at ``age_months``."""
    if age_months < 0:
        raise InvalidInput("age_months", "must be >= 0")
    points = resale_points(bundled_parts() if parts is None else parts)
    if not points:
        raise InvalidInput("parts", "no dated launch/used price pair to fit a resale curve")
    name = canonical_gpu(gpu)
    own = points.get(name)
    k = _decay_rate(own) if own else _decay_rate([pt for pts in points.values() for pt in pts])
    return math.exp(-max(k, 0.0) * age_months)


def _gpu_age_at_purchase(gpu_part: Part, parts: Iterable[Part]) -> float:
    if gpu_part.condition != "used":
        return 0.0
    launches = [p for p in parts if p.category == "gpu" and p.condition == "msrp" and p.specs["gpu"] == gpu_part.specs["gpu"]]
    return max(0.0, _months_between(launches[0].as_of, gpu_part.as_of)) if launches else 0.0


# --- assembly -----------------------------------------------------------------------------------


def load_power_w(gpu: str, gpu_count: int, cpu: Part) -> float:
    return gpu_spec(gpu).tdp_w * gpu_count + float(cpu.specs["tdp_w"]) + REST_OF_SYSTEM_W


def pick_psu(load_w: float, parts: Iterable[Part], headroom: float) -> Part:
    fits = [p for p in parts if p.category == "psu" and float(p.specs["watts"]) >= headroom * load_w]
    if not fits:
        raise UnsupportedConfig("psu", f"no PSU of at least {headroom * load_w:.0f} W in the parts catalog")
    return min(fits, key=lambda p: (p.price_usd, float(p.specs["watts"])))


def assemble(
    *,
    build_id: str,
    name: str,
    tier: str,
    gpu_part: Part,
    gpu_count: int,
    others: Sequence[Part],
    catalog: Sequence[Part],
    psu_headroom: float = 1.3,
    lifetime_months: int = DEFAULT_LIFETIME_MONTHS,
    lead_time_days: float = 7,
    electricity: Electricity | None = None,
    notes: str = "",
) -> LocalBuild:
    """Pure: chosen parts -> a priced LocalBuild (PSU sized here, resale from the curve)."""
    gpu = str(gpu_part.specs["gpu"])
    by_cat: dict[str, list[Part]] = {}
    for p in others:
        by_cat.setdefault(p.category, []).append(p)
    for needed in ("cpu", "board", "ram", "storage"):
        if needed not in by_cat:
            raise InvalidInput("parts", f"build {build_id} has no {needed}")
    cpu = by_cat["cpu"][0]
    load = load_power_w(gpu, gpu_count, cpu)
    psu = pick_psu(load, catalog, psu_headroom)
    parts = [gpu_part] * gpu_count + list(others) + [psu]
    price = round(sum(p.price_usd for p in parts), 2)
    age0 = _gpu_age_at_purchase(gpu_part, catalog)
    keep = resale_fraction(gpu, age0 + lifetime_months, catalog) / resale_fraction(gpu, age0, catalog)
    resale = gpu_part.price_usd * gpu_count * keep / price
    power = electricity or bundled_electricity()["us-average"]
    storage = by_cat["storage"]
    return LocalBuild(
        id=build_id,
        name=name,
        tier=tier,
        gpu=gpu,
        gpu_count=gpu_count,
        gpu_vram_gb=gpu_spec(gpu).vram_gb,
        cpu=cpu.name,
        cpu_cores=int(cpu.specs["cores"]),
        ram_gb=sum(float(p.specs["gb"]) for p in by_cat["ram"]),
        storage=storage[0].name,
        storage_gb=sum(float(p.specs.get("gb", 0)) for p in storage),
        psu_w=float(psu.specs["watts"]),
        parts=parts,
        price_usd=price,
        load_power_w=load,
        idle_power_w=round(IDLE_FRACTION * load, 1),
        lifetime_months=lifetime_months,
        resale_fraction=round(min(1.0, resale), 4),
        lead_time_days=lead_time_days,
        electricity_usd_per_kwh=power.usd_per_kwh,
        electricity_source=f"{power.region}: {power.source}",
        source=(
            f"assembled from parts.csv ({', '.join(p.id for p in parts)}); load = GPU TDP x {gpu_count} + CPU TDP "
            f"+ {REST_OF_SYSTEM_W:.0f} W; PSU >= {psu_headroom} x load; idle = {IDLE_FRACTION} x load (assumed); "
            f"resale: GPU launch-vs-used curve, other parts at 0; lead time assumed"
            + (f"; {notes}" if notes else "")
        ),
        as_of=min(p.as_of for p in parts),
    )


def builds_from_yaml(text: str, catalog: Sequence[Part], electricity: Electricity | None = None) -> list[LocalBuild]:
    by_id = {p.id: p for p in catalog}
    specs: list[dict[str, Any]] = yaml.safe_load(text) or []
    builds: list[LocalBuild] = []
    for spec in specs:
        try:
            gpu_part = by_id[spec["gpu_part"]]
            others = [by_id[pid] for pid in spec["parts"]]
        except KeyError as exc:
            raise InvalidInput("builds", f"build {spec.get('id')}: unknown part {exc.args[0]}") from exc
        builds.append(
            assemble(
                build_id=spec["id"],
                name=spec["name"],
                tier=str(spec.get("tier", "")),
                gpu_part=gpu_part,
                gpu_count=int(spec["gpu_count"]),
                others=others,
                catalog=catalog,
                lifetime_months=int(spec.get("lifetime_months", DEFAULT_LIFETIME_MONTHS)),
                lead_time_days=float(spec.get("lead_time_days", 7)),
                electricity=electricity,
                notes=str(spec.get("notes", "")),
            )
        )
    return builds


def _cheapest(parts: Iterable[Part], category: str, ok: Callable[[Part], bool] = lambda p: True) -> Part:
    fits = [p for p in parts if p.category == category and ok(p)]
    if not fits:
        raise UnsupportedConfig(category, f"no suitable {category} in the parts catalog")
    return min(fits, key=lambda p: p.price_usd)


def _cheapest_ram(parts: Sequence[Part], need_gb: float, max_kits: int = 2) -> list[Part]:
    kits = [p for p in parts if p.category == "ram"]
    best: list[Part] | None = None
    for n in range(1, max_kits + 1):
        for combo in product(kits, repeat=n):
            if sum(float(p.specs["gb"]) for p in combo) >= need_gb:
                if best is None or sum(p.price_usd for p in combo) < sum(p.price_usd for p in best):
                    best = list(combo)
    if best is None:
        raise UnsupportedConfig("ram", f"{need_gb:.0f} GB does not fit in {max_kits} kits from the catalog")
    return best


def balanced_build(
    gpu: str,
    gpu_count: int,
    parts: Sequence[Part],
    *,
    ram_per_vram: float = 2.0,
    min_ram_gb: float = 32.0,
    min_cores: int = 8,
    min_threads: int = 16,
    cores_per_gpu: int = 4,
    psu_headroom: float = 1.3,
    lifetime_months: int = DEFAULT_LIFETIME_MONTHS,
    allow_used: bool = False,
) -> LocalBuild:
    """The cheapest machine around ``gpu_count`` x ``gpu`` that meets the seeds' balancing rules."""
    if gpu_count < 1:
        raise InvalidInput("gpu_count", "must be >= 1")
    name = canonical_gpu(gpu)
    catalog = current_parts(parts)
    conditions = ("new", "msrp", "used") if allow_used else ("new", "msrp")
    gpu_part = _cheapest(catalog, "gpu", lambda p: p.specs["gpu"] == name and p.condition in conditions)
    cores = max(min_cores, cores_per_gpu * gpu_count)
    cpu = _cheapest(catalog, "cpu", lambda p: p.specs["cores"] >= cores and p.specs["threads"] >= min_threads)
    board = _cheapest(catalog, "board", lambda p: p.specs.get("gpu_slots", 1) >= gpu_count)
    ram = _cheapest_ram(catalog, max(min_ram_gb, ram_per_vram * gpu_spec(name).vram_gb * gpu_count))
    others = [cpu, board, *ram, _cheapest(catalog, "storage"), _cheapest(catalog, "case"), _cheapest(catalog, "cooler")]
    return assemble(
        build_id=f"balanced-{name.lower()}-{gpu_count}x",
        name=f"Balanced: {gpu_count}x {name}",
        tier="generated",
        gpu_part=gpu_part,
        gpu_count=gpu_count,
        others=others,
        catalog=list(parts),
        psu_headroom=psu_headroom,
        lifetime_months=lifetime_months,
        lead_time_days=7 if gpu_part.condition == "used" else 3,
        notes=f"generated: RAM >= max({min_ram_gb:g} GB, {ram_per_vram:g} x VRAM), >= {cores} cores",
    )


def all_builds(parts: Sequence[Part], builds_yaml: str) -> list[LocalBuild]:
    """Hand-written builds plus a generated one for every catalog GPU without one."""
    builds = builds_from_yaml(builds_yaml, parts)
    covered = {b.gpu for b in builds}
    for gpu in sorted({str(p.specs["gpu"]) for p in parts if p.category == "gpu"} - covered):
        builds.append(balanced_build(gpu, 1, parts, allow_used=True))
    return builds


@register
class LocalSource:
    name: ClassVar[str] = "local"

    def __init__(self, parts_file: Path | None = None) -> None:
        self.parts_file = parts_file

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> LocalSource:
        return cls(Path(settings.parts_file) if settings.parts_file else None)

    def fetch(self) -> RawSnapshot:
        parts = self.parts_file.read_text(encoding="utf-8") if self.parts_file else _data_text("parts.csv")
        return RawSnapshot(
            provider=self.name,
            fetched_at=datetime.now(UTC),
            payloads={"parts.csv": parts, "builds.yaml": _data_text("builds.yaml")},
        )

    def parse(self, raw: RawSnapshot) -> list[LocalBuild]:
        return all_builds(parts_from_csv(raw.payloads["parts.csv"]), raw.payloads["builds.yaml"])
