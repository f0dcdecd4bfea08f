"""Shared fixtures: a clean GPUCOST_* environment, the reference data, fresh stores."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Credential chains probe the cloud metadata servers (169.254.169.254) when nothing else is set;
# tests must not send that traffic. Set before any SDK module reads them at import time.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
os.environ.setdefault("NO_GCE_CHECK", "true")
# This process runs the estimator's Python modules, whose internals tests patch; the servers and
# commands the tests start run the compiled ones where a current build exists (optimizer.native;
# tests/integration/test_native.py holds the two to the same answers). Set before optimizer loads.
# GPUCOST_TEST_NATIVE=1 runs the tests on the compiled modules instead, all but those marked
# ``python_only`` (they patch, subclass or inspect the modules' internals): test_native.py runs the unit and
# contract tests so.
ON_COMPILED = os.environ.get("GPUCOST_TEST_NATIVE") == "1"
os.environ["GPUCOST_NATIVE"] = "1" if ON_COMPILED else "0"


def pytest_sessionstart(session: pytest.Session) -> None:
    if ON_COMPILED:
        import importlib

        from optimizer import native

        for name in native.MODULES:
            importlib.import_module(name)
        if native.compiled() != native.MODULES:
            raise pytest.UsageError(f"GPUCOST_TEST_NATIVE=1: no current build in {native.native_dir()} "
                                    "(.venv/bin/python scripts/native.py makes one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ON_COMPILED:
        skip = pytest.mark.skip(reason="patches, subclasses or inspects the Python modules' internals")
        for item in items:
            if item.get_closest_marker("python_only"):
                item.add_marker(skip)

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
# Copies of the public reference data (see data/reference/README.md for sources and dates).
REFERENCE = DATA / "reference"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test sees the caller's GPUCOST_* settings or writes to the user's data dir."""
    for key in list(os.environ):
        if key.startswith("GPUCOST_") and key != "GPUCOST_TEST_PG_URL":
            monkeypatch.delenv(key, raising=False)
    data_home = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    from service.settings import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    if not REFERENCE.is_dir():
        pytest.fail(f"reference data not found at {REFERENCE}")
    return REFERENCE


@pytest.fixture(scope="session")
def reference_offers(reference_dir: Path) -> list[Any]:
    """The reference SkyPilot catalog's offers, read once a process, as one list (what quotes keep
    per offer list is found again by the next test)."""
    from pricing.adapters.skypilot_csv import load_skypilot

    return load_skypilot(reference_dir / "skypilot-catalog")


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def tmp_db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gpucost.sqlite'}"


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A PostgreSQL server URL (postgresql+psycopg://...) from GPUCOST_TEST_PG_URL.

    In CI the server is required: its absence fails the test instead of skipping it.
    """
    url = os.environ.get("GPUCOST_TEST_PG_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("GPUCOST_TEST_PG_URL is unset in CI: .ci/run must start PostgreSQL")
        pytest.skip("GPUCOST_TEST_PG_URL unset (run infra/postgres-ci.sh to get one)")
    return url


@pytest.fixture
def unfits_taken(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ``Unfit`` option generation takes from now on (``estimate.estimate_or_unfit``, counted
    where ``candidates.estimator`` calls it: Python only)."""
    import optimizer.candidates.estimator as cand_estimator
    from optimizer.estimator.estimate import Unfit, estimate_or_unfit

    taken: list[Any] = []

    def counting(*a: Any) -> Any:
        u = estimate_or_unfit(*a)
        if isinstance(u, Unfit):
            taken.append(u)
        return u

    monkeypatch.setattr(cand_estimator, "estimate_or_unfit", counting)
    return taken
