"""``gpucost quotas refresh``: read each provider's quotas and store them, provider by provider.

A provider without credentials is skipped and keeps what was stored (none at first: its options
stay ``unknown``); one that fails keeps its last good rows and reports the error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from optimizer.errors import MissingCredentials, ProviderError
from pricing.store.quotas import replace_quotas

logger = logging.getLogger(__name__)


def _aws(settings: Any) -> Any:
    from pricing.quotas.aws import AwsQuotaReader

    return AwsQuotaReader.from_settings(settings)


def _gcp(settings: Any) -> Any:
    from pricing.quotas.gcp import GcpQuotaReader

    return GcpQuotaReader.from_settings(settings)


READERS: dict[str, Callable[[Any], Any]] = {"aws": _aws, "gcp": _gcp}


@dataclass(frozen=True, slots=True)
class QuotaRefreshResult:
    provider: str
    status: Literal["ok", "skipped", "error"]
    rows: int = 0
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "status": self.status, "rows": self.rows, "detail": self.detail}


def refresh_quotas(
    store: Any, settings: Any, providers: Sequence[str] | None = None,
    readers: Mapping[str, Callable[[Any], Any]] | None = None,
) -> list[QuotaRefreshResult]:
    makers = dict(readers or READERS)
    out: list[QuotaRefreshResult] = []
    for name in providers or list(makers):
        make = makers.get(name)
        if make is None:
            out.append(QuotaRefreshResult(name, "error", detail=f"no quota reader for {name!r} (known: {', '.join(makers)})"))
            continue
        try:
            limits = make(settings).read()
        except MissingCredentials as exc:
            out.append(QuotaRefreshResult(name, "skipped", detail=exc.reason))
            continue
        except ProviderError as exc:
            logger.warning("quota refresh of %s failed; keeping its stored quotas: %s", name, exc.reason)
            out.append(QuotaRefreshResult(name, "error", detail=exc.reason))
            continue
        out.append(QuotaRefreshResult(name, "ok", rows=replace_quotas(store, name, limits)))
    return out
