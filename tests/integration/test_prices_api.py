"""Prices over HTTP: offers, freshness, history and the admin refresh."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from optimizer.errors import ProviderError
from pricing.snapshot.loader import load_bundled
from pricing.store.repository import open_store
from service.api.app import create_app
from service.settings import Settings
from tests.integration._pricestore import FakeSource, catalog_offers

TOKEN = "test-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=tmp_db_url, admin_token=TOKEN))) as c:
        yield c


def test_offers_cheapest_first_with_filters(client: TestClient) -> None:
    r = client.get("/v1/offers", params={"gpu": "a100-80gb", "gpu_count": 8})
    assert r.status_code == 200, r.text
    offers = r.json()["offers"]
    bundled = [o for o in load_bundled().offers if o.gpu == "A100-80GB" and o.gpu_count == 8 and o.price_hour]
    assert len(offers) == len(bundled) > 0
    assert [o["price_hour"] for o in offers] == sorted(o.price_hour for o in bundled)  # type: ignore[misc]
    assert set(offers[0]) >= {"provider", "region", "zone", "instance_type", "gpu", "gpu_count", "gpu_vram_gb",
                              "vcpus", "ram_gb", "price_hour", "spot_price_hour", "currency",
                              "price_hour_native", "billing_increment_s", "source", "as_of"}

    both = client.get("/v1/offers?provider=aws,gcp&limit=5").json()["offers"]
    repeated = client.get("/v1/offers?provider=aws&provider=gcp&limit=5").json()["offers"]
    assert both == repeated and len(both) == 5 and {o["provider"] for o in both} <= {"aws", "gcp"}

    spot = client.get("/v1/offers", params={"spot": True, "max_hourly": 2}).json()["offers"]
    assert spot and all(o["spot_price_hour"] <= 2 for o in spot)
    assert [o["spot_price_hour"] for o in spot] == sorted(o["spot_price_hour"] for o in spot)


def test_offers_bad_input_is_422(client: TestClient) -> None:
    r = client.get("/v1/offers", params={"gpu": "A1000"})
    assert r.status_code == 422
    assert "did you mean" in r.json()["detail"][0]["msg"]
    assert client.get("/v1/offers", params={"limit": 0}).status_code == 422


def test_status_reports_freshness_per_provider(client: TestClient) -> None:
    body = client.get("/v1/prices/status").json()
    rows = {p["provider"]: p for p in body["providers"]}
    bundled = load_bundled()
    assert set(rows) == {o.provider for o in bundled.offers} | {"local"}
    for provider, as_of in bundled.as_of.items():
        assert datetime.fromisoformat(rows[provider]["as_of"].replace("Z", "+00:00")) == as_of
        assert rows[provider]["stale"] == ((datetime.now(UTC) - as_of).days > 3)
        assert set(rows[provider]) >= {"provider", "rows", "as_of", "last_attempt", "last_error", "stale"}


def test_refresh_is_admin_only(client: TestClient) -> None:
    assert client.post("/v1/prices/refresh").status_code == 401
    assert client.post("/v1/prices/refresh", headers={"Authorization": "Bearer wrong"}).status_code == 403
    r = client.post("/v1/prices/refresh", headers=AUTH, json={"providers": ["no-such-cloud"]})
    assert r.status_code == 422


def test_failed_provider_keeps_serving_its_rows_and_is_flagged(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    gcp_before = client.get("/v1/offers?provider=gcp").json()["offers"]
    assert gcp_before
    lam = catalog_offers("lambda")
    sources = {
        "lambda": FakeSource("lambda", lam).factory(),
        "gcp": FakeSource("gcp", [], faults=[ProviderError("gcp", "PermissionDenied: billing API")]).factory(),
    }
    monkeypatch.setattr("pricing.refresh.registered_sources", lambda: sources)
    r = client.post("/v1/prices/refresh", headers=AUTH, json={})
    assert r.status_code == 200, r.text
    results = {x["provider"]: x for x in r.json()["results"]}
    assert results["lambda"]["status"] == "updated" and results["lambda"]["rows"] == len(lam)
    assert results["gcp"]["status"] == "failed"

    assert client.get("/v1/offers?provider=gcp").json()["offers"] == gcp_before
    assert len(client.get("/v1/offers?provider=lambda").json()["offers"]) == len([o for o in lam if o.price_hour])
    status = {p["provider"]: p for p in client.get("/v1/prices/status").json()["providers"]}
    assert "PermissionDenied" in status["gcp"]["last_error"] and status["gcp"]["rows"] == len(gcp_before)
    assert status["lambda"]["last_error"] is None and status["lambda"]["rows"] == len(lam)


def test_refresh_while_another_runs_is_refused(client: TestClient, tmp_db_url: str) -> None:
    other = open_store(tmp_db_url)
    assert other.try_lease("refresh", "another-replica", ttl_s=60)
    r = client.post("/v1/prices/refresh", headers=AUTH, json={"providers": []})
    assert r.status_code == 409 and "another-replica" in r.json()["detail"]
    other.close()


def test_history(client: TestClient) -> None:
    r = client.get("/v1/prices/history", params={"instance_type": "p4d.24xlarge", "region": "us-east-1"})
    assert r.status_code == 200, r.text
    body = r.json()
    bundled = [o for o in load_bundled().offers if o.instance_type == "p4d.24xlarge" and o.region == "us-east-1"]
    want = sorted(o.price_hour for o in bundled if o.price_hour is not None)
    assert want and sorted(p["price_hour"] for p in body["points"]) == want
    assert all(p["is_current"] for p in body["points"])
    missing = client.get("/v1/prices/history", params={"instance_type": "p4d.24xlarg"})
    assert missing.status_code == 422 and "did you mean" in missing.json()["detail"][0]["msg"]


def test_serve_with_a_cron_runs_the_scheduler_in_the_lifespan(
    tmp_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service.scheduler as scheduler

    handles: list[object] = []
    real_start = scheduler.start_scheduler

    def spy(settings: Settings, store: object) -> object:
        handle = real_start(settings, store)  # type: ignore[arg-type]
        handles.append(handle)
        return handle

    monkeypatch.setattr(scheduler, "start_scheduler", spy)
    with TestClient(create_app(Settings(db_url=tmp_db_url, refresh_cron="0 3 * * *"))) as c:
        assert c.get("/v1/prices/status").status_code == 200
        (handle,) = handles
        assert handle.running and [j.id for j in handle.get_jobs()] == [scheduler.JOB_ID]  # type: ignore[attr-defined]
    assert not handle.running  # type: ignore[attr-defined]
