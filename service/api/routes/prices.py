"""Offers, price status, history and the admin refresh."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.estimator.gpus import canonical_gpu
from pricing.refresh import REFRESH_LEASE, RefreshResult, RefreshSummary, refresh_exclusive, refresh_summary
from service.api.deps import AdminDep, SettingsDep, StoreDep
from service.schemas import LeaseStatus, OffersResponse, PricesStatus, RefreshRun

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
        canonical_gpu(gpu, field="query.gpu")  # a 422 naming the field; the store expands families
    offers = store.offers(
        gpu=gpu, gpu_count=gpu_count, providers=split_csv(provider), regions=split_csv(region),
        spot=spot, max_hourly=max_hourly, limit=limit,
    )
    return OffersResponse(offers=offers)


def prices_status_doc(store: Any, stale_after_days: float) -> PricesStatus:
    """Per-provider freshness, the refresh lease, the latest runs and any damage found.

    A damaged store still answers: ``problems`` says which table, and the rest is filled in as far
    as the store can be read."""
    problems = store.problems()
    if problems:
        return PricesStatus(providers=[], problems=problems)
    lease = store.lease_info(REFRESH_LEASE)
    return PricesStatus(
        providers=store.status(stale_after_days),
        lease=None if lease is None else LeaseStatus(
            holder=lease.holder, acquired_at=lease.acquired_at, heartbeat_at=lease.heartbeat_at,
            expires_at=lease.expires_at, alive=lease.alive(),
        ),
        runs=[RefreshRun.model_validate(r) for r in store.refresh_runs(limit=20)],
    )


@router.get("/v1/prices/status", response_model=PricesStatus)
def prices_status(store: StoreDep, settings: SettingsDep) -> PricesStatus:
    return prices_status_doc(store, settings.stale_after_days)


ProviderName = Annotated[str, Field(min_length=1, max_length=64)]


class RefreshRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    providers: Annotated[list[ProviderName], Field(max_length=50)] | None = None
    force: bool | Annotated[list[ProviderName], Field(max_length=50)] = Field(
        default=False,
        description="providers (or sources) whose shrink by more than half is deliberate; true means "
        "the providers named in this request. Never lets a provider be emptied.",
    )


class RefreshResponse(BaseModel):
    results: list[RefreshResult]
    # Filled from ``results``: per provider refreshed / skipped (why) / failed (why).
    summary: RefreshSummary | None = None

    @model_validator(mode="after")
    def _summarise(self) -> RefreshResponse:
        if self.summary is None:
            self.summary = refresh_summary(self.results)
        return self


@router.post(
    "/v1/prices/refresh",
    response_model=RefreshResponse,
    responses={401: {"description": "no admin token"}, 403: {"description": "wrong token or admin disabled"},
               409: {"description": "another refresh holds the lease"}},
)
def prices_refresh(
    _: AdminDep,
    store: StoreDep,
    settings: SettingsDep,
    request: RefreshRequest | None = None,
    provider: Annotated[
        list[str] | None, Query(max_length=500, description="comma-separated sources to refresh")
    ] = None,
) -> RefreshResponse:
    """Run the price sources (``?provider=`` or the body's ``providers``; default all)."""
    request = request or RefreshRequest()
    providers = list(dict.fromkeys([*(split_csv(provider) or []), *(request.providers or [])])) or None
    results = refresh_exclusive(store, settings.source_settings(), providers=providers, force=request.force)
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
