"""``GET /v1/quotas``: the limits decisions read (stored by ``gpucost quotas refresh``, with the
``GPUCOST_QUOTAS`` file over them); ``POST /v1/quotas/refresh`` (admin) reads them again."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from service.api.deps import AdminDep, SettingsDep, StoreDep

router = APIRouter(prefix="/v1", tags=["quotas"])


def quotas_doc(store: Any, quotas_file: str | None) -> dict[str, Any]:
    """What ``gpucost quotas list --json`` prints and ``GET /v1/quotas`` answers."""
    from pricing.quotas import quota_book_for

    book = quota_book_for(store, quotas_file)
    rows = [
        {"provider": q.provider, "region": q.region, "code": q.code, "limit": q.limit,
         "unit": "vCPUs" if q.provider == "aws" else ("GPUs" if q.provider == "gcp" else None),
         "name": q.name, "source": q.source}
        for q in sorted(book.limits(), key=lambda q: (q.provider, q.region, q.code))
    ]
    return {"quotas": rows, "file": quotas_file}


@router.get("/quotas")
def list_quotas(store: StoreDep) -> dict[str, Any]:
    # The same reading of GPUCOST_QUOTAS as quotes make (service.answers).
    from service.settings import get_settings

    return quotas_doc(store, get_settings().quotas)


@router.post("/quotas/refresh")
def refresh(store: StoreDep, settings: SettingsDep, _admin: AdminDep) -> dict[str, Any]:
    from pricing.quotas import refresh_quotas

    results = refresh_quotas(store, settings.source_settings())
    return {"results": [r.as_dict() for r in results]}
