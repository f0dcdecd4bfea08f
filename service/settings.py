"""Validated settings from the environment (prefix ``GPUCOST_``), never built at import time."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pricing.source import SourceSettings


def _csv(value: object) -> object:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GPUCOST_", extra="ignore")

    db_url: str | None = Field(default=None, description="SQLAlchemy URL; unset: SQLite in the data dir")
    admin_token: str | None = None
    refresh_cron: str | None = Field(default=None, description='e.g. "0 3 * * *" (UTC)')
    stale_after_days: float = 3.0
    price_book: str | None = Field(default=None, description="path of a YAML/CSV price book")
    aws_regions: tuple[str, ...] = ("us-east-1", "us-west-2", "eu-west-1")
    gcp_project: str | None = None
    gcp_regions: tuple[str, ...] = ("us-central1", "us-east4", "europe-west4")
    alibaba_regions: tuple[str, ...] = ("cn-shanghai", "cn-beijing")
    autodl_dir: str | None = None
    skypilot_dir: str | None = None
    parts_file: str | None = None
    solver_time_limit_s: float = 10.0

    _split = field_validator("aws_regions", "gcp_regions", "alibaba_regions", mode="before")(_csv)

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
    return Settings()
