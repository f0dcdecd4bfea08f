"""What gpucost knows without prices: GPUs and model presets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from optimizer.estimator.gpus import all_gpus
from optimizer.estimator.shapes import list_presets

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get("/gpus")
def gpus() -> dict[str, list[dict[str, Any]]]:
    return {"gpus": [g.public() for g in all_gpus()]}


@router.get("/models")
def models() -> dict[str, list[dict[str, Any]]]:
    return {"models": list_presets()}
