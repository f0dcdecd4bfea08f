"""GPU catalog: canonical names (SkyPilot's accelerator names where one exists), aliases and specs.

Specs come from ``optimizer/estimator/data/gpu_specs.csv``; each row names its source. Tensor TFLOPs are
dense (no sparsity); GeForce cards are listed with FP32 accumulate, the rate mixed-precision
training actually gets.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

from optimizer.errors import UnknownGpu

GpuClass = Literal["consumer", "workstation", "datacenter"]
Generation = Literal[
    "kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna", "other"
]

# Canonical name -> architecture, for the cards whose name does not say it (NVIDIA datasheets).
_GENERATION = {
    "K80": "kepler", "M60": "maxwell", "P100": "pascal", "P4": "pascal", "V100": "volta",
    "V100-32GB": "volta", "T4": "turing", "RTX6000": "turing", "L4": "ada", "L40": "ada",
    "L40S": "ada", "H100": "hopper", "H100-PCIE": "hopper", "H100-NVL": "hopper", "H200": "hopper",
    "GH200": "hopper", "B200": "blackwell", "P4000": "pascal", "M4000": "maxwell", "MI25": "other",
    "MI300X": "cdna",
}


_GENERATION_CACHE: dict[str, Generation] = {}  # read on every estimate; names map to one answer


def generation_of(name: str, supports_bf16: bool, launch_year: int | None) -> Generation:
    if name in _GENERATION:
        return _GENERATION[name]  # type: ignore[return-value]
    if re.match(r"RTX5\d{3}", name):
        return "blackwell"
    if re.match(r"RTX4\d{3}", name) or name.endswith("Ada"):
        return "ada"
    if re.match(r"RTX3\d{3}", name) or name.startswith(("A", "RTXA")):
        return "ampere"
    if re.match(r"RTX2\d{3}", name):
        return "turing"
    # Unknown names: bf16 tensor cores arrived with Ampere.
    return "ampere" if supports_bf16 else ("turing" if (launch_year or 0) >= 2018 else "volta")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    name: str
    vendor: str
    gpu_class: GpuClass
    vram_gb: float
    mem_bw_gbs: float
    fp32_tflops: float
    fp16_tensor_tflops: float
    bf16_tensor_tflops: float | None  # None: no bf16 support (T4, V100, ...)
    tdp_w: float
    interconnect: Literal["nvlink", "pcie"]
    nvlink_gbs: float
    launch_year: int | None
    msrp_usd: float | None
    source: str
    verified: str
    aliases: tuple[str, ...] = ()

    @property
    def supports_bf16(self) -> bool:
        return self.bf16_tensor_tflops is not None

    @property
    def generation(self) -> Generation:
        """The architecture, which sets kernel support and how much of the peak GEMMs reach."""
        gen = _GENERATION_CACHE.get(self.name)
        if gen is None:
            gen = _GENERATION_CACHE[self.name] = generation_of(self.name, self.supports_bf16, self.launch_year)
        return gen

    def peak_tflops(self, precision: str) -> float:
        """Dense peak for the matmuls of a training step at ``precision``."""
        if precision == "fp32":
            return self.fp32_tflops
        if precision in ("bf16", "bf16-true"):
            # Without bf16 tensor cores frameworks fall back to fp32 maths.
            return self.bf16_tensor_tflops if self.bf16_tensor_tflops else self.fp32_tflops
        return self.fp16_tensor_tflops

    def public(self) -> dict[str, object]:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "gpu_class": self.gpu_class,
            "vram_gb": self.vram_gb,
            "mem_bw_gbs": self.mem_bw_gbs,
            "fp32_tflops": self.fp32_tflops,
            "fp16_tensor_tflops": self.fp16_tensor_tflops,
            "bf16_tensor_tflops": self.bf16_tensor_tflops,
            "tdp_w": self.tdp_w,
            "interconnect": self.interconnect,
            "nvlink_gbs": self.nvlink_gbs,
            "launch_year": self.launch_year,
            "msrp_usd": self.msrp_usd,
            "source": self.source,
            "verified": self.verified,
        }


def _key(name: str) -> str:
    """Normalise a GPU name for alias lookup: case, vendor words and separators don't matter."""
    s = name.upper()
    s = re.sub(r"\b(NVIDIA|GEFORCE|TESLA|QUADRO)\b", " ", s)
    return re.sub(r"[^A-Z0-9]", "", s)


def _opt_float(v: str) -> float | None:
    return float(v) if v.strip() else None


@lru_cache(maxsize=1)
def _catalog() -> tuple[dict[str, GpuSpec], dict[str, str]]:
    specs: dict[str, GpuSpec] = {}
    index: dict[str, str] = {}
    text = resources.files("optimizer.estimator").joinpath("data/gpu_specs.csv").read_text(encoding="utf-8")
    for row in csv.DictReader(text.splitlines()):
        aliases = tuple(a.strip() for a in row["aliases"].split(";") if a.strip())
        spec = GpuSpec(
            name=row["name"],
            vendor=row["vendor"],
            gpu_class=row["gpu_class"],  # type: ignore[arg-type]
            vram_gb=float(row["vram_gb"]),
            mem_bw_gbs=float(row["mem_bw_gbs"]),
            fp32_tflops=float(row["fp32_tflops"]),
            fp16_tensor_tflops=float(row["fp16_tensor_tflops"]),
            bf16_tensor_tflops=_opt_float(row["bf16_tensor_tflops"]),
            tdp_w=float(row["tdp_w"]),
            interconnect=row["interconnect"],  # type: ignore[arg-type]
            nvlink_gbs=float(row["nvlink_gbs"] or 0),
            launch_year=int(row["launch_year"]) if row["launch_year"] else None,
            msrp_usd=_opt_float(row["msrp_usd"]),
            source=row["source"],
            verified=row["verified"],
            aliases=aliases,
        )
        specs[spec.name] = spec
        for alias in (spec.name, *aliases):
            index.setdefault(_key(alias), spec.name)
    return specs, index


def gpu_names() -> list[str]:
    return list(_catalog()[0])


def all_gpus() -> list[GpuSpec]:
    return list(_catalog()[0].values())


def find_gpu(name: str) -> str | None:
    """Canonical name for ``name``, or None when it is not a GPU we know."""
    specs, index = _catalog()
    if name in specs:
        return name
    key = _key(name)
    if key in index:
        return index[key]
    # "A100 80GB" style: strip a trailing memory suffix only if it changes nothing else.
    m = re.fullmatch(r"(.*?)(\d+)GB", key)
    if m and m.group(1) in index:
        canon = index[m.group(1)]
        for cand in (canon, f"{canon}-{m.group(2)}GB"):
            if cand in specs and int(specs[cand].vram_gb) == int(m.group(2)):
                return cand
    return None


def canonical_gpu(name: str, field: str = "gpu") -> str:
    canon = find_gpu(name)
    if canon is None:
        raise UnknownGpu(name, gpu_names(), field=field)
    return canon


def gpu_spec(name: str, field: str = "gpu") -> GpuSpec:
    return _catalog()[0][canonical_gpu(name, field=field)]


# A bare name that users and SkyPilot use for a family of boards: "H100" asks for the SXM and the
# PCIe board (Lambda's gpu_1x_h100_pcie is an H100 in SkyPilot's catalog), each estimated by its own
# spec. A name that says the board ("H100-SXM", "H100 PCIe") asks for that board only.
GPU_FAMILIES: dict[str, tuple[str, ...]] = {"H100": ("H100", "H100-PCIE")}


def gpu_family(name: str, field: str = "gpu") -> tuple[str, ...]:
    """Canonical names ``name`` asks for: its family for a bare family name, else itself."""
    canon = canonical_gpu(name, field=field)
    return GPU_FAMILIES.get(_key(name), (canon,))
