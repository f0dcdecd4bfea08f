from __future__ import annotations

import csv
from pathlib import Path

import pytest

from optimizer.errors import UnknownGpu
from optimizer.estimator.gpus import all_gpus, canonical_gpu, find_gpu, gpu_spec

CONTRACT_NAMES = [
    "T4", "V100", "V100-32GB", "A10", "A10G", "L4", "L40S", "A100", "A100-80GB", "H100", "H200",
    "RTX3060", "RTX3090", "RTX4070TiSuper", "RTX4090", "RTX5090", "RTX6000Ada",
]


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_contract_names_are_canonical(name: str) -> None:
    assert canonical_gpu(name) == name


@pytest.mark.parametrize(
    ("alias", "canon"),
    [
        ("rtx 4090", "RTX4090"),
        ("4090", "RTX4090"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("a100-40gb", "A100"),
        ("A100 80GB", "A100-80GB"),
        ("NVIDIA GeForce RTX 3090", "RTX3090"),
        ("rtx 4070 ti super", "RTX4070TiSuper"),
        ("H100-MEGA", "H100"),
        ("Tesla V100-SXM2-32GB", "V100-32GB"),
        ("RTX6000-Ada", "RTX6000Ada"),
    ],
)
def test_aliases(alias: str, canon: str) -> None:
    assert canonical_gpu(alias) == canon


def test_unknown_gpu_suggests() -> None:
    with pytest.raises(UnknownGpu) as err:
        canonical_gpu("RTX 4099")
    assert err.value.field == "gpu"
    assert "RTX4090" in err.value.reason
    assert find_gpu("definitely-not-a-gpu") is None


def test_every_reference_gpu_has_a_spec(reference_dir: Path) -> None:
    """Each GPU of the reference specs table resolves, with the same VRAM and dense tensor rate."""
    with open(reference_dir / "facts" / "gpu_specs.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 27
    for row in rows:
        name = row["gpu"].replace("(AWS g5)", "").replace("PCIe 16/32GB", "PCIe 16GB").strip()
        spec = gpu_spec(name)
        vram = row["vram_gb"].split()[0]
        assert spec.vram_gb == pytest.approx(float(vram), rel=0.02) or "PCIe" in name, name
        if row["fp16_bf16_dense_tflops"] and "PCIe" not in name:
            assert spec.fp16_tensor_tflops == pytest.approx(float(row["fp16_bf16_dense_tflops"]), rel=0.01), name


def test_specs_carry_sources() -> None:
    for spec in all_gpus():
        assert spec.source, spec.name
        assert spec.vram_gb > 0 and spec.fp32_tflops > 0 and spec.tdp_w > 0
        assert spec.peak_tflops("bf16") >= spec.peak_tflops("fp32") or not spec.supports_bf16


def test_no_bf16_falls_back_to_fp32_rate() -> None:
    t4 = gpu_spec("T4")
    assert not t4.supports_bf16
    assert t4.peak_tflops("bf16") == t4.fp32_tflops
    assert t4.peak_tflops("fp16") == 65
