"""Canonical GPU names from the free-text names marketplaces and GPU clouds use."""

from __future__ import annotations

import re

from optimizer.estimator.gpus import find_gpu, gpu_spec

_NOISE = re.compile(r"\b(nvidia|geforce|tesla|pcie|sxm[0-9]?|nvl|hbm3e?|gb)\b", re.IGNORECASE)


def canonical_gpu(name: str, vram_gb: float | None = None) -> str | None:
    """``find_gpu`` on the name, then on the name without vendor and form-factor words; the
    memory picks the variant when the base name has several (A100 40 GB / 80 GB)."""
    text = name.replace("_", " ").strip()
    gpu = find_gpu(text)
    if gpu is None:
        cleaned = " ".join(_NOISE.sub(" ", text).split())
        cleaned = re.sub(r"\b(\d+)\s*$", "", cleaned).strip() if re.search(r"\b\d{2,3}\s*$", cleaned) else cleaned
        gpu = find_gpu(cleaned)
    if gpu is None:
        return None
    if vram_gb:
        spec_gb = gpu_spec(gpu).vram_gb
        if abs(spec_gb - vram_gb) > 4:
            variant = find_gpu(f"{gpu}-{round(vram_gb)}GB")
            if variant is not None and abs(gpu_spec(variant).vram_gb - vram_gb) <= 4:
                return variant
    return gpu
