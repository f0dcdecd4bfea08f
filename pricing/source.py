"""The price-source protocol and its registry.

A source has four members: ``name``; ``from_settings(settings)`` (raises ``MissingCredentials``
so the source is skipped); ``fetch() -> RawSnapshot``, the only I/O; and ``parse(raw)``, pure and
tested on recorded payloads. ``refresh`` runs fetch -> parse -> validate -> store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from optimizer.offer import LocalBuild, Offer


@dataclass(frozen=True)
class SourceSettings:
    """What the sources read from the environment; filled by ``service.settings``."""

    aws_regions: tuple[str, ...] = ("us-east-1", "us-west-2", "eu-west-1")
    gcp_project: str | None = None
    gcp_regions: tuple[str, ...] = ("us-central1", "us-east4", "europe-west4")
    alibaba_regions: tuple[str, ...] = ("cn-shanghai", "cn-beijing")
    autodl_dir: str | None = None  # folder of AutoDL-style snapshot files; None: bundled ones
    skypilot_dir: str | None = None
    parts_file: str | None = None
    stale_after_days: float = 3.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RawSnapshot:
    provider: str
    fetched_at: datetime
    payloads: dict[str, Any]


Rows = list[Offer] | list[LocalBuild]


@runtime_checkable
class PriceSource(Protocol):
    name: ClassVar[str]

    @classmethod
    def from_settings(cls, settings: SourceSettings) -> PriceSource: ...

    def fetch(self) -> RawSnapshot: ...

    def parse(self, raw: RawSnapshot) -> Rows: ...


_REGISTRY: dict[str, type[PriceSource]] = {}
S = TypeVar("S", bound=type)


def register(cls: S) -> S:
    _REGISTRY[cls.name] = cls  # type: ignore[attr-defined]
    return cls


def registered_sources() -> dict[str, type[PriceSource]]:
    # Importing the package registers every adapter.
    import pricing.adapters  # noqa: F401

    return dict(_REGISTRY)


SourceFactory = Callable[[SourceSettings], PriceSource]
