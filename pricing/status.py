"""What the price store says about each provider: rows, dates, the last attempt and its outcome.

A value type of the pricing layer (the store builds it); the service re-exports it as part of its
``/v1/prices/status`` response.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class ProviderStatus(BaseModel):
    model_config = ConfigDict(defer_build=True)

    provider: str
    rows: int
    as_of: datetime | None
    last_attempt: datetime | None
    last_error: str | None
    stale: bool
    age_hours: float | None = None
    snapshot_id: str | None = None
    last_aborted: datetime | None = Field(
        default=None, description="start of the latest refresh of this source that died half-way"
    )
