"""FastAPI dependencies as ``Annotated`` aliases."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.settings import Settings

if TYPE_CHECKING:
    from pricing.store.repository import PriceStore


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


def get_store_for(app: Any) -> PriceStore:
    """The app's price store, opened (and seeded if empty) on first use."""
    store = getattr(app.state, "store", None)
    if store is None:
        from pricing.store.repository import open_store

        store = open_store(app.state.settings.db_url)
        app.state.store = store
    return store  # type: ignore[no-any-return]


def get_store(request: Request) -> PriceStore:
    return get_store_for(request.app)


# Any, not PriceStore: FastAPI would evaluate the annotation, and routes only need its methods.
StoreDep = Annotated[Any, Depends(get_store)]

_bearer = HTTPBearer(auto_error=False)


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    # Without a configured token the admin surface is closed, not open.
    token = settings.admin_token
    if not token:
        raise HTTPException(status_code=403, detail="admin endpoints are disabled (GPUCOST_ADMIN_TOKEN unset)")
    if credentials is None or not secrets.compare_digest(credentials.credentials, token):
        raise HTTPException(status_code=403, detail="invalid or missing admin token")


AdminDep = Annotated[None, Depends(require_admin)]
