"""Schemathesis on the service's own OpenAPI: whatever a client sends, no answer is a 5xx."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import schemathesis
from hypothesis import HealthCheck, settings

from service.api.app import create_app
from service.settings import Settings

# Made at import, as schemathesis reads the schema from the app when the tests are collected; so
# every process that collects this module (each xdist worker) removes its own at exit.
_DIR = tempfile.mkdtemp(prefix="gpucost-fuzz-")
app = create_app(Settings(db_url=f"sqlite:///{os.path.join(_DIR, 'fuzz.sqlite')}"))
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


def _remove_the_store() -> None:
    store = getattr(app.state, "store", None)
    if store is not None:
        store.close()
    shutil.rmtree(_DIR, ignore_errors=True)


atexit.register(_remove_the_store)


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
