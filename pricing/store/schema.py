"""Tables of the price store.

A *snapshot* is one provider's full price list as fetched at one time; its rows hang off it.
Exactly one snapshot per provider is current (a partial unique index says so), so swapping in a
new price list is an insert plus a flip of ``is_current`` inside one transaction, and every older
snapshot stays behind as history.

The schema here and ``migrations/versions`` must agree; a test compares them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    false,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from optimizer.offer import Commitment


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every back end.

    SQLite keeps no offset and hands back naive values; PostgreSQL keeps one. Storing UTC and
    re-attaching it on the way out makes ``as_of`` comparable whichever store answered.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps timezone-aware UTC times")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class CommitmentsJson(TypeDecorator[list[Commitment]]):
    """``Offer.commitments`` as a JSON list, read back as ``Commitment`` models.

    Offers are read back with ``Offer.model_construct`` (no validation), so the column itself
    hands out models: plain dicts there would compare unequal to validated offers and make
    pydantic warn on every dump. NULL (most offers, and rows stored before migration 0006) reads
    as an empty list; an empty list is stored as NULL to keep those rows small.
    """

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: list[Commitment | dict[str, Any]] | None,
                           dialect: Dialect) -> list[dict[str, Any]] | None:
        if not value:
            return None
        return [c.model_dump(mode="json") if isinstance(c, Commitment) else c for c in value]

    def process_result_value(self, value: Any, dialect: Dialect) -> list[Commitment]:
        # Validated, not constructed: the JSON holds dates as text, and validation parses them
        # (it is also the faster of the two for these few hundred rows' terms).
        return [Commitment.model_validate(c) for c in value] if value else []


# Stable constraint names, so migrations can refer to them on both back ends.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class SnapshotRow(Base):
    __tablename__ = "snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(64), nullable=False)
    fetched_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    as_of: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    row_count: Mapped[int] = mapped_column(Integer, nullable=False)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    is_current: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    # Accepted with ``force``: the row-collapse guard's history starts again here.
    forced: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())

    __table_args__ = (
        Index("ix_snapshots_provider_fetched_at", "provider", "fetched_at"),
        # At most one current snapshot per provider: a second concurrent swap fails loudly.
        Index(
            "uq_snapshots_current_provider",
            "provider",
            unique=True,
            sqlite_where=text("is_current"),
            postgresql_where=text("is_current"),
        ),
    )


class OfferRow(Base):
    __tablename__ = "offers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("snapshots.id", ondelete="CASCADE"), nullable=False, index=True
    )
    provider: Mapped[str] = mapped_column(String(64), nullable=False)
    region: Mapped[str] = mapped_column(String(128), nullable=False)
    zone: Mapped[str | None] = mapped_column(String(128))
    instance_type: Mapped[str] = mapped_column(String(200), nullable=False, index=True)
    gpu: Mapped[str] = mapped_column(String(64), nullable=False)
    gpu_count: Mapped[float] = mapped_column(Float, nullable=False)
    gpu_vram_gb: Mapped[float] = mapped_column(Float, nullable=False)
    vcpus: Mapped[float | None] = mapped_column(Float)
    ram_gb: Mapped[float | None] = mapped_column(Float)
    price_hour: Mapped[float | None] = mapped_column(Float)
    spot_price_hour: Mapped[float | None] = mapped_column(Float)
    currency: Mapped[str] = mapped_column(String(8), nullable=False)
    price_hour_native: Mapped[float | None] = mapped_column(Float)
    spot_price_hour_native: Mapped[float | None] = mapped_column(Float)
    billing_increment_s: Mapped[int] = mapped_column(Integer, nullable=False)
    min_billing_s: Mapped[int] = mapped_column(Integer, nullable=False)
    interconnect: Mapped[str | None] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(Text, nullable=False)
    as_of: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    # Offer.commitments as dumped JSON (migration 0006); NULL on rows stored before it: none.
    # Nullable though reads never give None (CommitmentsJson turns NULL into []).
    commitments: Mapped[list[Commitment]] = mapped_column(CommitmentsJson, nullable=True)


class LocalBuildRow(Base):
    __tablename__ = "local_builds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("snapshots.id", ondelete="CASCADE"), nullable=False, index=True
    )
    build_id: Mapped[str] = mapped_column(String(200), nullable=False)
    gpu: Mapped[str] = mapped_column(String(64), nullable=False)
    gpu_count: Mapped[int] = mapped_column(Integer, nullable=False)
    price_usd: Mapped[float] = mapped_column(Float, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    as_of: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    # The build's remaining fields and its bill of materials, as LocalBuild dumps them.
    attrs: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)


class ProviderStatusRow(Base):
    __tablename__ = "provider_status"

    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_attempt: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_success: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)


class LeaseRow(Base):
    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    acquired_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class RefreshRunRow(Base):
    """One source's refresh attempt. ``status`` is ``running`` until it ends; a ``running`` row
    whose holder no longer holds the refresh lease belongs to a refresh that died."""

    __tablename__ = "refresh_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(64), nullable=False)
    holder: Mapped[str] = mapped_column(String(200), nullable=False)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    detail: Mapped[str | None] = mapped_column(Text)


class StoreMetaRow(Base):
    """Small facts about the store itself, e.g. that the bundled snapshot was loaded once."""

    __tablename__ = "store_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(String(500), nullable=False)


class MeasurementRow(Base):
    """One measured recipe on one device (``optimizer.measurement.Measurement``; issue 21). The
    whole record is kept as JSON; the columns are what lists and look-ups select on."""

    __tablename__ = "measurements"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpu: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    gpu_count: Mapped[int] = mapped_column(Integer, nullable=False)
    source: Mapped[str] = mapped_column(String(32), nullable=False)
    fits: Mapped[bool] = mapped_column(Boolean, nullable=False)
    measured_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    record: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)


class PlannedRunRow(Base):
    """A run as quoted (``optimizer.runs.PlannedRun``; issue 25): the option as JSON, the columns
    what lists, matching and calibration select on."""

    __tablename__ = "planned_runs"

    run_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    team: Mapped[str | None] = mapped_column(String(100), index=True)
    job: Mapped[str | None] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(64), nullable=False)
    gpu: Mapped[str] = mapped_column(String(64), nullable=False)
    quoted_usd: Mapped[float] = mapped_column(Float, nullable=False)
    quoted_hours: Mapped[float] = mapped_column(Float, nullable=False)
    snapshot_id: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    record: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)


class BillImportRow(Base):
    """One bill file read in whole; the same file (by SHA-256) is taken once."""

    __tablename__ = "bill_imports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    file_sha256: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    format: Mapped[str] = mapped_column(String(16), nullable=False)
    imported_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    lines: Mapped[int] = mapped_column(Integer, nullable=False)
    # Decimal text: sums stay exact to the cent on every back end.
    billed_total: Mapped[str] = mapped_column(String(40), nullable=False)
    effective_total: Mapped[str] = mapped_column(String(40), nullable=False)


class BillLineRow(Base):
    """One bill line, with the run it was matched to at import (NULL: unmatched spend)."""

    __tablename__ = "bill_lines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    import_id: Mapped[int] = mapped_column(
        ForeignKey("bill_imports.id", ondelete="CASCADE"), nullable=False, index=True
    )
    row: Mapped[int] = mapped_column(Integer, nullable=False)
    run_id: Mapped[str | None] = mapped_column(String(128), index=True)
    matched_by: Mapped[str | None] = mapped_column(String(16))
    provider: Mapped[str] = mapped_column(String(64), nullable=False)
    category: Mapped[str] = mapped_column(String(16), nullable=False)
    charge_start: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    charge_end: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)
    billed: Mapped[str] = mapped_column(String(40), nullable=False)
    effective: Mapped[str] = mapped_column(String(40), nullable=False)
    hours: Mapped[float] = mapped_column(Float, nullable=False)
    hours_per: Mapped[str] = mapped_column(String(8), nullable=False)
    resource_id: Mapped[str | None] = mapped_column(Text)
    tags: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    service: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False)
    charge_category: Mapped[str] = mapped_column(String(64), nullable=False)
    covered: Mapped[bool] = mapped_column(Boolean, nullable=False)


class BillCalibrationRow(Base):
    """Factors learnt from every reconciled run, per provider and GPU (rewritten at each import)."""

    __tablename__ = "bill_calibration"

    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpu: Mapped[str] = mapped_column(String(64), primary_key=True)
    hours_factor: Mapped[float] = mapped_column(Float, nullable=False)
    rate_factor: Mapped[float] = mapped_column(Float, nullable=False)
    runs: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)


class QuotaRow(Base):
    """One account limit (issue 24): an AWS Service Quotas code (vCPUs) or a GCP quota metric
    (GPUs) in one region ("global" for project-wide), as the last ``gpucost quotas refresh`` read it."""

    __tablename__ = "quotas"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(64), nullable=False)
    region: Mapped[str] = mapped_column(String(128), nullable=False)
    code: Mapped[str] = mapped_column(String(128), nullable=False)
    quota_limit: Mapped[float] = mapped_column(Float, nullable=False)
    name: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    fetched_at: Mapped[datetime] = mapped_column(UtcDateTime, nullable=False)

    __table_args__ = (Index("uq_quotas_provider_region_code", "provider", "region", "code", unique=True),)
