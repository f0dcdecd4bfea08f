"""Offers, price status, history and the admin refresh."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from optimizer.estimator.gpus import canonical_gpu
from pricing.refresh import RefreshResult, refresh_exclusive
from service.api.deps import AdminDep, SettingsDep, StoreDep
from service.schemas import OffersResponse, PricesStatus

router = APIRouter(tags=["prices"])


def split_csv(values: list[str] | None) -> list[str] | None:
    """``?provider=aws,gcp`` and ``?provider=aws&provider=gcp`` mean the same."""
    if not values:
        return None
    items = [v.strip() for value in values for v in value.split(",") if v.strip()]
    return items or None


@router.get("/v1/offers", response_model=OffersResponse)
def list_offers(
    store: StoreDep,
    gpu: Annotated[str | None, Query(max_length=100, description="GPU name or alias")] = None,
    gpu_count: Annotated[float | None, Query(gt=0, le=4096)] = None,
    provider: Annotated[list[str] | None, Query(description="comma-separated provider ids")] = None,
    region: Annotated[list[str] | None, Query(description="comma-separated regions")] = None,
    spot: bool = False,
    max_hourly: Annotated[float | None, Query(gt=0)] = None,
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
) -> OffersResponse:
    if gpu is not None:
        gpu = canonical_gpu(gpu, field="query.gpu")
    offers = store.offers(
        gpu=gpu, gpu_count=gpu_count, providers=split_csv(provider), regions=split_csv(region),
        spot=spot, max_hourly=max_hourly, limit=limit,
    )
    return OffersResponse(offers=offers)


@router.get("/v1/prices/status", response_model=PricesStatus)
def prices_status(store: StoreDep, settings: SettingsDep) -> PricesStatus:
    return PricesStatus(providers=store.status(settings.stale_after_days))


class RefreshRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    providers: Annotated[list[str], Field(max_length=50)] | None = None
    force: bool = False


class RefreshResponse(BaseModel):
    results: list[RefreshResult]


@router.post("/v1/prices/refresh", response_model=RefreshResponse)
def prices_refresh(
    _: AdminDep, store: StoreDep, settings: SettingsDep, request: RefreshRequest | None = None
) -> RefreshResponse:
    request = request or RefreshRequest()
    results = refresh_exclusive(
        store, settings.source_settings(), providers=request.providers, force=request.force
    )
    return RefreshResponse(results=results)


class PricePoint(BaseModel):
    snapshot_id: int
    fetched_at: datetime
    is_current: bool
    provider: str
    region: str
    zone: str | None
    instance_type: str
    gpu: str
    gpu_count: float
    price_hour: float | None
    spot_price_hour: float | None
    currency: str
    price_hour_native: float | None
    source: str
    as_of: datetime


class HistoryResponse(BaseModel):
    instance_type: str
    region: str | None
    provider: str | None
    points: list[PricePoint]


def history_response(
    store: Any, instance_type: str, region: str | None, provider: str | None
) -> HistoryResponse:
    points = store.history(instance_type, region=region, provider=provider)
    return HistoryResponse(
        instance_type=instance_type, region=region, provider=provider,
        points=[PricePoint.model_validate(p) for p in points],
    )


@router.get("/v1/prices/history", response_model=HistoryResponse)
def prices_history(
    store: StoreDep,
    instance_type: Annotated[str, Query(min_length=1, max_length=200)],
    region: Annotated[str | None, Query(max_length=100)] = None,
    provider: Annotated[str | None, Query(max_length=100)] = None,
) -> HistoryResponse:
    return history_response(store, instance_type, region, provider)
