"""Validated settings from the environment (prefix ``GPUCOST_``), never built at import time.

Read with pydantic alone: a variable per field, named without regard to case; arguments win over
the environment, which wins over the defaults; lists are comma-separated (or a JSON list). A bad
value is an ``InvalidInput`` naming the variable (exit 2 from the CLI; the server does not start).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from optimizer.errors import InvalidInput
from pricing.source import SourceSettings

if TYPE_CHECKING:
    from pricing.price_view import PriceView


ENV_PREFIX = "GPUCOST_"


def _csv(value: object) -> object:
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                pass  # not JSON after all: let the comma-separated reading say what is wrong
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return value


def environment() -> dict[str, str]:
    """The ``GPUCOST_*`` variables by field name (``GPUCOST_DB_URL`` -> ``db_url``)."""
    n = len(ENV_PREFIX)
    return {key[n:].lower(): value for key, value in os.environ.items() if key.upper().startswith(ENV_PREFIX)}


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore")

    db_url: str | None = Field(default=None, description="SQLAlchemy URL; unset: SQLite in the data dir")
    admin_token: str | None = None
    refresh_cron: str | None = Field(default=None, description='e.g. "0 3 * * *" (UTC)')
    stale_after_days: float = 3.0
    price_book: str | None = Field(default=None, description="path of a YAML/CSV price book")
    quotas: str | None = Field(default=None, description="path of a YAML/CSV quota file (provider, region, code, limit)")
    fx_file: str | None = Field(default=None, description="CSV of dated exchange rates added to the bundled ones")
    aws_regions: tuple[str, ...] = ("us-east-1", "us-west-2", "eu-west-1")
    gcp_project: str | None = None
    gcp_regions: tuple[str, ...] = ("us-central1", "us-east4", "europe-west4")
    alibaba_regions: tuple[str, ...] = ("cn-shanghai", "cn-beijing")
    autodl_dir: str | None = None
    skypilot_dir: str | None = None
    parts_file: str | None = None
    solver_time_limit_s: float = 10.0
    # Bounded work (service.api.limits): expensive requests running at once and waiting, per lane,
    # and one wall-clock limit per request covering its queue wait and all its solves.
    max_solves: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), ge=1, le=256)
    solve_queue: int = Field(default=8, ge=0, le=10_000)
    max_quotes: int = Field(default_factory=lambda: 2 * max(1, os.cpu_count() or 1), ge=1, le=1024)
    quote_queue: int = Field(default=128, ge=0, le=100_000)
    request_time_limit_s: float = Field(default=60.0, gt=0, le=3600)
    # Expensive requests one client address may have running or queued at once (0: no limit):
    # one caller's flood is refused past its share instead of filling every lane.
    max_requests_per_client: int = Field(default=32, ge=0, le=100_000)
    max_body_bytes: int = Field(default=1_000_000, ge=1024, le=1_000_000_000)
    # Worker processes for plans, frontiers and recommendations (0: on the server's threads).
    # ``service.api.asgi`` (what ``gpucost serve`` runs) defaults it to ``max_solves``.
    solve_processes: int = Field(default=0, ge=0, le=256)
    answer_cache: bool = Field(default=True, description="keep answers for identical requests on the same prices")
    # Each served process binds its threads to a CPU no other one holds (service.api.affinity).
    serve_cpu_affinity: Literal["auto", "off"] = "auto"
    # gpucost serve --workers N: a busier process hands kept-alive connections on (service.api.balance).
    serve_balance: Literal["auto", "off"] = "auto"

    _split = field_validator("aws_regions", "gcp_regions", "alibaba_regions", mode="before")(_csv)

    @model_validator(mode="before")
    @classmethod
    def _environment_fills_the_rest(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        env = {k: v for k, v in environment().items() if k in cls.model_fields}
        return {**env, **data}

    @classmethod
    def from_environment(cls) -> Settings:
        """The settings as the environment gives them; a bad value names its variable."""
        try:
            return cls()
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first.get("loc") else ""
            raise InvalidInput(f"{ENV_PREFIX}{field.upper()}", str(first.get("msg", "invalid value"))) from None

    def price_view(self) -> PriceView:
        """Dated currency and the price book, as every answer applies them; a missing or invalid
        file raises ``InvalidInput`` naming it."""
        from pricing.price_view import price_view

        return price_view(self.price_book, self.fx_file, self.stale_after_days)

    def source_settings(self) -> SourceSettings:
        return SourceSettings(
            aws_regions=self.aws_regions,
            gcp_project=self.gcp_project,
            gcp_regions=self.gcp_regions,
            alibaba_regions=self.alibaba_regions,
            autodl_dir=self.autodl_dir,
            skypilot_dir=self.skypilot_dir,
            parts_file=self.parts_file,
            stale_after_days=self.stale_after_days,
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_environment()
