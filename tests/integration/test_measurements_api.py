"""Measurements over HTTP: adding needs the admin token, bad records are 422 naming the field and
store nothing, and a stored RTX 4090 measurement changes the quote (measured on that GPU, scaled
on the others) until it is removed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from optimizer.estimator.estimate import estimate
from optimizer.estimator.workload import Workload
from service.api.app import create_app
from service.settings import Settings

TOKEN = "probe-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
RECORD_FILE = Path(__file__).resolve().parents[1] / "data" / "probe" / "rtx4090_bert_base.json"


def _record() -> dict[str, Any]:
    return json.loads(RECORD_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("measurements") / "gpucost.sqlite"
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}", admin_token=TOKEN))) as c:
        yield c


def _stored(client: TestClient) -> list[dict[str, Any]]:
    r = client.get("/v1/measurements")
    assert r.status_code == 200
    return r.json()["measurements"]  # type: ignore[no-any-return]


def test_adding_needs_the_admin_token(client: TestClient) -> None:
    assert client.post("/v1/measurements", json=_record()).status_code == 401
    bad = {"Authorization": "Bearer wrong"}
    assert client.post("/v1/measurements", json=_record(), headers=bad).status_code == 403
    assert client.delete("/v1/measurements/m-000000000000", headers=bad).status_code == 403
    assert _stored(client) == []


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"step_seconds": {"median": 323.2, "p10": 320.0, "p90": 330.0}}, "step_seconds.median"),
        ({"step_seconds": {"median": -0.3232, "p10": 0.3, "p90": 0.4}}, "step_seconds.median"),
        ({"gpu": "RTX 4099"}, "gpu"),
        ({"peak_vram_gb": 21_458.0}, "peak_vram_gb"),
        ({"model_params": 7_000_000_000}, "model_params"),
    ],
)
def test_bad_records_are_422_and_store_nothing(client: TestClient, changes: dict[str, Any], loc: str) -> None:
    r = client.post("/v1/measurements", json={**_record(), **changes}, headers=ADMIN)
    assert r.status_code == 422, r.text
    locs = [".".join(str(p) for p in d["loc"]) for d in r.json()["detail"]]
    assert any(x.endswith(loc) for x in locs), locs
    assert _stored(client) == []


def _options(client: TestClient) -> list[dict[str, Any]]:
    body = {"workload": _record()["workload"], "top": 30,
            "constraints": {"gpus": ["RTX4090", "A100-80GB", "L40S"], "max_gpus": 1}}
    r = client.post("/v1/quote", json=body)
    assert r.status_code == 200, r.text
    return r.json()["options"]  # type: ignore[no-any-return]


def test_a_measurement_changes_the_quote_until_removed(client: TestClient) -> None:
    workload = Workload.model_validate(_record()["workload"])
    before = _options(client)
    assert before and {o["basis"] for o in before} == {"model"}
    assert {o["gpu"] for o in before} >= {"RTX4090", "A100-80GB"}

    r = client.post("/v1/measurements", json=_record(), headers=ADMIN)
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    assert client.post("/v1/measurements", json=_record(), headers=ADMIN).status_code == 200  # stored once
    assert [m["id"] for m in _stored(client)] == [mid]

    measured = client.post("/v1/estimate", json={"workload": _record()["workload"], "gpu": "RTX4090"}).json()
    assert (measured["basis"], measured["measurement_id"], measured["tokens_per_second"]) == ("measured", mid, 114048.0)

    after = _options(client)
    assert {o["gpu"] for o in after} == {o["gpu"] for o in before}
    assert {o["basis"] for o in after} == {"measured", "scaled"}
    for o in after:
        assert o["measurement_id"] == mid
        if o["gpu"] == "RTX4090":
            assert o["basis"] == "measured"
            # The option's run takes the measured estimate's hours (no other change on a rental).
            assert o["hours"] == pytest.approx(measured["hours"], rel=2e-3)
        else:
            assert o["basis"] == "scaled"
            model = estimate(workload, o["gpu"], 1, None)
            ratio = model.tokens_per_second / estimate(workload, "RTX4090", 1, None).tokens_per_second
            scaled = client.post("/v1/estimate", json={"workload": _record()["workload"], "gpu": o["gpu"]}).json()
            assert scaled["basis"] == "scaled"
            assert scaled["tokens_per_second"] == pytest.approx(114048.0 * ratio, rel=1e-3)
            assert o["hours"] == pytest.approx(scaled["hours"], rel=2e-3)
    md = client.post("/v1/quote?format=markdown", json={"workload": _record()["workload"], "top": 5,
                                                         "constraints": {"gpus": ["RTX4090"], "max_gpus": 1}}).text
    assert "**Measured:**" in md and f"measured on this GPU (measurement `{mid}`)" in md
    est_md = client.post("/v1/estimate?format=markdown", json={"workload": _record()["workload"], "gpu": "A100-80GB"})
    assert "**Basis:** speed and memory scaled from measurement" in est_md.text
    model_4090 = estimate(workload, "RTX4090", 1, None)
    # Break-even reads the same measured hours for the card to buy.
    be = client.post("/v1/breakeven", json={"workload": _record()["workload"], "rent": {"gpu": "A100-80GB"},
                                            "buy": {"gpu": "RTX4090"}, "runs_per_month": 4})
    assert be.status_code == 200, be.text
    assert be.json()["buy"]["hours_per_run"] == pytest.approx(measured["hours"], rel=2e-3)
    assert abs(be.json()["buy"]["hours_per_run"] - model_4090.hours) > 1e-3
    assert any(o["gpu"] == "RTX4090" and abs(o["hours"] - model_4090.hours) > 1e-3 for o in after)

    gone = client.delete(f"/v1/measurements/{mid}", headers=ADMIN)
    assert gone.status_code == 200 and gone.json() == {"removed": mid}
    assert client.delete(f"/v1/measurements/{mid}", headers=ADMIN).status_code == 404
    restored = _options(client)
    assert {o["basis"] for o in restored} == {"model"}
    assert [(o["instance_type"], o["hours"]) for o in restored] == [(o["instance_type"], o["hours"]) for o in before]
