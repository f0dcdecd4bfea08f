"""Errors raised by gpucost.

    GpucostError
    ├── InvalidInput(field, reason)      -> HTTP 422, CLI exit 2
    │   ├── UnknownGpu                   (offers "did you mean")
    │   ├── UnknownModel                 (offers "did you mean")
    │   └── UnsupportedConfig            (a config.json we cannot read)
    ├── ProviderError(provider, reason, retriable)
    │   └── MissingCredentials           (the source is skipped)
    ├── StoreError
    └── SolverError(status)

Errors are mapped to HTTP once, in ``service.api.app``; the CLI maps them to exit codes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GpucostError(Exception):
    """Base class of every error gpucost raises on purpose."""


class InvalidInput(GpucostError):
    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


class UnknownGpu(InvalidInput):
    def __init__(self, name: str, choices: Iterable[str], field: str = "gpu") -> None:
        self.name = name
        super().__init__(field, f"unknown GPU {name!r}{_did_you_mean(name, choices)}")


class UnknownModel(InvalidInput):
    def __init__(self, name: str, choices: Iterable[str], field: str = "workload.model") -> None:
        self.name = name
        super().__init__(field, f"unknown model preset {name!r}{_did_you_mean(name, choices)}")


class UnsupportedConfig(InvalidInput):
    """A Hugging Face config.json that lacks what the estimator needs."""


class ProviderError(GpucostError):
    def __init__(self, provider: str, reason: str, retriable: bool = False) -> None:
        self.provider = provider
        self.reason = reason
        self.retriable = retriable
        super().__init__(f"{provider}: {reason}")


class MissingCredentials(ProviderError):
    def __init__(self, provider: str, reason: str = "no credentials found") -> None:
        super().__init__(provider, reason, retriable=False)


class StoreError(GpucostError):
    pass


class SolverError(GpucostError):
    def __init__(self, status: str, detail: str = "") -> None:
        self.status = status
        super().__init__(f"solver returned {status}" + (f": {detail}" if detail else ""))
