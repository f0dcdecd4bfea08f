"""FastAPI dependencies as ``Annotated`` aliases."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.settings import Settings

if TYPE_CHECKING:
    from pricing.store.repository import PriceStore


async def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


def get_store_for(app: Any) -> PriceStore:
    """The app's price store, opened (and seeded if empty) on first use."""
    store = getattr(app.state, "store", None)
    if store is None:
        from pricing.store.repository import open_store

        store = open_store(app.state.settings.db_url)
        # A server lives long: on PostgreSQL it listens for the store's change notices, so an
        # answer's reads are kept while nothing changes, as on SQLite (``PriceStore.follow_changes``).
        store.follow_changes()
        app.state.store = store
        app.state.store_by_url = True  # worker processes can open this very store
    view = getattr(app.state, "price_view", None)
    if view is not None and store.price_view is not view:
        store.price_view = view  # also a store handed in from outside answers with the book
    return store  # type: ignore[no-any-return]


async def get_store(request: Request) -> PriceStore:
    # Opened once off the event loop (creating and seeding a store takes seconds); afterwards a
    # lookup, answered on the loop: a sync dependency would cost every request a thread hop.
    if getattr(request.app.state, "store", None) is None:
        import anyio

        return await anyio.to_thread.run_sync(get_store_for, request.app)
    return get_store_for(request.app)


# Any, not PriceStore: FastAPI would evaluate the annotation, and routes only need its methods.
StoreDep = Annotated[Any, Depends(get_store)]

_bearer = HTTPBearer(auto_error=False)


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison of a header's token with the configured one.

    ``compare_digest`` raises on ``str`` with non-ASCII characters, so bytes are compared: the
    server decoded the header's raw bytes as Latin-1, so encoding it back gives them exactly, and
    a token set in the environment is compared as its UTF-8 bytes, which is what a client sends.
    """
    try:
        raw = given.encode("latin-1")
    except UnicodeEncodeError:
        raw = given.encode("utf-8", "surrogateescape")
    return secrets.compare_digest(raw, expected.encode("utf-8"))


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    # Without a configured token the admin surface is closed, not open.
    token = settings.admin_token
    if not token:
        raise HTTPException(status_code=403, detail="admin endpoints are disabled (GPUCOST_ADMIN_TOKEN unset)")
    if credentials is None:
        raise HTTPException(
            status_code=401, detail="admin token required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not token_matches(credentials.credentials, token):
        raise HTTPException(status_code=403, detail="invalid admin token")


AdminDep = Annotated[None, Depends(require_admin)]
