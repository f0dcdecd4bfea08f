"""Schemathesis on the service's own OpenAPI: whatever a client sends, no answer is a 5xx."""

from __future__ import annotations

import os
import tempfile

import schemathesis
from hypothesis import HealthCheck, settings

from service.api.app import create_app
from service.settings import Settings

_DB = os.path.join(tempfile.mkdtemp(prefix="gpucost-fuzz-"), "fuzz.sqlite")
app = create_app(Settings(db_url=f"sqlite:///{_DB}"))
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("GPUCOST_FUZZ_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500, (
        f"{case.method} {case.path} -> {response.status_code}: {response.text[:500]}"
    )
