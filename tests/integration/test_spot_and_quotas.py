"""Spot risk and quotas through the public entry points: /v1/quote, /v1/quotas and the CLI
(``gpucost quote``, ``gpucost quotas refresh | list``) on the bundled snapshot."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from optimizer import spot_risk as sr
from optimizer.quotas import AWS_P_ON_DEMAND, QuotaLimit
from service.api.app import create_app
from service.cli import app
from service.settings import Settings

DATA = Path(__file__).resolve().parents[1] / "data" / "quotas"
HEADLINE = {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8}
SPOT_RISK_KEYS = {"interruptions_per_hour", "source", "expected_cost_usd", "p90_cost_usd", "expected_hours",
                  "p90_hours", "p_meets_deadline"}
# A full fine-tune on 8 x A100 nodes; with a deadline under one p4d.24xlarge's hours it needs two.
BIG = {"workload": {"model": "llama-3-8b", "method": "full", "tokens": 2e9},
       "constraints": {"providers": ["aws", "gcp"], "regions": ["us-east-1", "us-central1"],
                       "gpus": ["A100"], "include_local": False},
       "top": 10}
runner = CliRunner()


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('spot-quotas') / 'gpucost.sqlite'}"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, db_url: str) -> pytest.MonkeyPatch:
    """The store for CLI and server alike, and no cloud credentials anywhere."""
    from service.settings import get_settings

    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("CLOUDSDK_CONFIG", "/nonexistent/gcloud")
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def _quotas_file(env: pytest.MonkeyPatch, path: Path | None) -> None:
    from service.settings import get_settings

    if path is None:
        env.delenv("GPUCOST_QUOTAS", raising=False)
    else:
        env.setenv("GPUCOST_QUOTAS", str(path))
    get_settings.cache_clear()


@pytest.fixture
def client(env: pytest.MonkeyPatch, db_url: str) -> Iterator[TestClient]:
    # The answer cache would serve an answer given before the quota file changed.
    with TestClient(create_app(Settings(db_url=db_url, answer_cache=False))) as c:
        yield c


def _cloud(q: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in [q["best"], q["fastest"], *q["options"]] if o is not None and o["kind"] == "cloud"]


@pytest.fixture(autouse=True)
def _no_stored_quotas(db_url: str) -> Iterator[None]:
    """Each test starts and ends with no stored quotas (the store is shared by the module)."""
    from pricing.store.quotas import replace_quotas
    from pricing.store.repository import open_store

    def wipe() -> None:
        store = open_store(db_url)
        try:
            for provider in ("aws", "gcp"):
                replace_quotas(store, provider, [])
        finally:
            store.close()

    wipe()
    yield
    wipe()


def _one_p4d_hours(client: TestClient) -> float:
    q = client.post("/v1/quote", json=BIG).json()
    return min(o["hours"] for o in _cloud(q) if o["instance_type"] == "p4d.24xlarge" and o["nodes"] == 1)


def _big(deadline: float | None, **constraints: Any) -> dict[str, Any]:
    return {**BIG, "constraints": {**BIG["constraints"], "deadline_hours": deadline, **constraints}}


def test_headline_spot_quote_shows_risk_per_spot_option(client: TestClient) -> None:
    body = {"workload": HEADLINE, "constraints": {"deadline_hours": 24, "allow_spot": True,
                                                  "providers": ["aws", "gcp"]}, "top": 15}
    r = client.post("/v1/quote", json=body)
    assert r.status_code == 200, r.text
    q = r.json()
    spot = [o for o in _cloud(q) if o["pricing"] == "spot"]
    assert spot, "the headline job with spot allowed shows spot options"
    for o in spot:
        risk = o["spot_risk"]
        assert SPOT_RISK_KEYS <= set(risk), risk
        assert risk["source"] and risk["interruptions_per_hour"] > 0
        assert risk["expected_cost_usd"] > 0 and risk["p90_hours"] >= risk["p50_hours"] > 0
        # The fallback to on demand keeps the deadline.
        assert risk["fallback"] == "on_demand" and risk["p_meets_deadline"] >= 0.99
        if o["provider"] == "aws" and risk["bucket"] is not None:
            assert risk["source"].startswith("aws-spot-advisor:2025-11-30")
        if o["provider"] == "gcp":
            assert risk["source"].startswith("prior:")
        # Reclaims cost time: the expected bill is dearer than the price ratio promises.
        assert risk["expected_cost_ratio"] > risk["price_ratio"]
    assert any(o["spot_risk"]["bucket"] == ">20%" for o in spot)
    assert all(o["spot_risk"] is None for o in _cloud(q) if o["pricing"] == "on_demand")
    # No quota data (no credentials, no file): never ok.
    assert {o["quota"] for o in _cloud(q)} == {"unknown"}


def test_a_run_of_millions_of_hours_on_spot_is_answered_with_its_risk_bounded(client: TestClient) -> None:
    """The largest amount of training a request may ask for (1e14 tokens: millions of hours on a T4)
    is answered: each spot option's simulation follows its runs through a bounded number of reclaims
    and says how the rest was finished (it once turned once per reclaim: 10.8 s for this request)."""
    body = {"workload": {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 1e14},
            "constraints": {"allow_spot": True, "gpus": ["T4"], "providers": ["aws", "gcp"], "include_local": False}}
    r = client.post("/v1/quote", json=body)
    assert r.status_code == 200, r.text
    spot = [o for o in _cloud(r.json()) if o["pricing"] == "spot"]
    assert spot
    for o in spot:
        risk = o["spot_risk"]
        assert risk["method"].endswith(f"after {sr.MAX_SIMULATED_RECLAIMS} reclaims finished at the expected rate")
        # The simulated mean agrees with the expected hours the option is priced at.
        assert risk["expected_hours"] == pytest.approx(o["hours"], rel=0.02) and o["hours"] > 1e5
        assert risk["expected_reclaims"] > sr.MAX_SIMULATED_RECLAIMS


def test_a_risky_bucket_at_no_discount_loses_to_on_demand(client: TestClient) -> None:
    # p3.16xlarge in eu-west-2: Spot Advisor ">20%" and a spot price equal to on demand (28.712).
    body = {"workload": HEADLINE, "constraints": {"deadline_hours": 24, "allow_spot": True, "providers": ["aws"],
                                                  "regions": ["eu-west-2"], "gpus": ["V100"],
                                                  "include_local": False}, "top": 20}
    q = client.post("/v1/quote", json=body).json()
    p3 = [o for o in q["options"] if o["instance_type"] == "p3.16xlarge"]
    assert p3 and all(o["pricing"] == "on_demand" for o in p3)


def test_quota_file_marks_two_p4d_short_one_ok_and_gcp_unknown(client: TestClient, env: pytest.MonkeyPatch) -> None:
    _quotas_file(env, DATA / "p_family_96.yaml")
    # Without a deadline one p4d.24xlarge (96 vCPUs) is enough, and within the quota.
    one = [o for o in _cloud(client.post("/v1/quote", json=BIG).json())
           if o["instance_type"] == "p4d.24xlarge" and o["nodes"] == 1]
    assert one and {o["quota"] for o in one} == {"ok"}
    assert one[0]["quota_detail"]["limit"] == 96.0 and one[0]["quota_detail"]["need"] == 96.0
    deadline = 0.95 * one[0]["hours"]
    q = client.post("/v1/quote", json=_big(deadline)).json()
    two = [o for o in _cloud(q) if o["instance_type"] == "p4d.24xlarge" and o["nodes"] == 2]
    assert two and all(o["quota"] == "short" for o in two)
    d = two[0]["quota_detail"]
    assert (d["code"], d["need"], d["limit"], d["unit"]) == (AWS_P_ON_DEMAND, 192.0, 96.0, "vCPUs")
    assert {o["quota"] for o in _cloud(q) if o["provider"] == "gcp"} == {"unknown"}

    # respect_quotas: the shorts are rejected, with the code to request named.
    s = client.post("/v1/quote", json=_big(deadline, respect_quotas=True)).json()
    assert all(o["quota"] != "short" for o in _cloud(s))
    reasons = [g for g in s["rejected"] if AWS_P_ON_DEMAND in g["reason"]]
    assert reasons and reasons[0]["reason"].startswith("quota short") and "p4d.24xlarge" in reasons[0]["examples"][0]
    assert s["best"] is not None and s["best"]["provider"] == "gcp"

    listed = client.get("/v1/quotas").json()
    assert listed["quotas"] == [{"provider": "aws", "region": "us-east-1", "code": AWS_P_ON_DEMAND, "limit": 96.0,
                                 "unit": "vCPUs", "name": None, "source": f"file:{DATA / 'p_family_96.yaml'}"}]


def test_markdown_shows_spot_risk_and_quota_per_option(client: TestClient, env: pytest.MonkeyPatch) -> None:
    _quotas_file(env, DATA / "p_family_96.csv")
    text = client.post("/v1/quote?format=markdown", json=_big(0.95 * _one_p4d_hours(client))).text
    assert "Spot risk and quotas" in text
    assert f"short ({AWS_P_ON_DEMAND}: need 192 / limit 96 vCPUs)" in text
    spot = {"workload": HEADLINE, "constraints": {"deadline_hours": 24, "allow_spot": True, "providers": ["aws"]},
            "top": 5}
    text = client.post("/v1/quote?format=markdown", json=spot).text
    # Reclaims per hour with the Spot Advisor bucket they come from (">" escaped in table cells).
    assert re.search(r"\| spot \| unknown \(L-[0-9A-F]{8}: need \d+ / limit \? vCPUs\) \| 0\.\d{4}/h \((&gt;|>)20%\)", text)


def test_bad_spot_and_quota_inputs_are_422_naming_the_field(client: TestClient, env: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    r = client.post("/v1/quote", json={"workload": HEADLINE, "constraints": {"checkpoint_interval_hours": -1}})
    assert r.status_code == 422 and "checkpoint_interval_hours" in r.text
    r = client.post("/v1/quote", json={"workload": HEADLINE, "constraints": {"respect_quotas": "sometimes"}})
    assert r.status_code == 422 and "respect_quotas" in r.text
    bad = tmp_path / "q.yaml"
    bad.write_text("- {provider: aws, region: us-east-1, code: L-417A185B, limit: lots}\n")
    _quotas_file(env, bad)
    r = client.post("/v1/quote", json={"workload": HEADLINE})
    assert r.status_code == 422 and "GPUCOST_QUOTAS" in r.text and "not a number" in r.text


def _cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


class _FakeReader:
    def __init__(self, limits: list[QuotaLimit]) -> None:
        self.limits = limits

    def read(self) -> list[QuotaLimit]:
        return self.limits


def test_cli_quotas_refresh_stores_and_quotes_use_them(env: pytest.MonkeyPatch, tmp_path: Path,
                                                        client: TestClient) -> None:
    from pricing.quotas import refresh as refresh_mod

    _quotas_file(env, None)
    fakes = {
        "aws": lambda _s: _FakeReader([QuotaLimit("aws", "us-east-1", AWS_P_ON_DEMAND, 96, "aws-service-quotas",
                                                  "Running On-Demand P instances")]),
        "gcp": lambda _s: _FakeReader([QuotaLimit("gcp", "us-central1", "NVIDIA_A100_GPUS", 16, "gcp-compute"),
                                       QuotaLimit("gcp", "global", "GPUS_ALL_REGIONS", 16, "gcp-compute")]),
    }
    env.setattr(refresh_mod, "READERS", fakes)
    result = _cli("quotas", "refresh", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"results": [
        {"provider": "aws", "status": "ok", "rows": 1, "detail": None},
        {"provider": "gcp", "status": "ok", "rows": 2, "detail": None},
    ]}
    listed = json.loads(_cli("quotas", "list", "--json").stdout)
    assert {(q["provider"], q["region"], q["code"], q["limit"]) for q in listed["quotas"]} == {
        ("aws", "us-east-1", AWS_P_ON_DEMAND, 96.0), ("gcp", "us-central1", "NVIDIA_A100_GPUS", 16.0),
        ("gcp", "global", "GPUS_ALL_REGIONS", 16.0),
    }
    req = tmp_path / "big.json"
    req.write_text(json.dumps(_big(0.95 * _one_p4d_hours(client))))
    out = _cli("quote", "--request", str(req), "--json")
    assert out.exit_code == 0, out.output
    q = json.loads(out.stdout)
    states = {(o["provider"], o["instance_type"], o["nodes"]): o["quota"] for o in _cloud(q)}
    assert states[("aws", "p4d.24xlarge", 2)] == "short"
    assert states.get(("gcp", "a2-megagpu-16g", 1)) == "ok"
    # A refresh replaces a provider's rows: an empty read leaves none of its old ones.
    env.setattr(refresh_mod, "READERS", {"aws": lambda _s: _FakeReader([])})
    assert _cli("quotas", "refresh", "--provider", "aws", "--json").exit_code == 0
    left = json.loads(_cli("quotas", "list", "--json").stdout)["quotas"]
    assert {q["provider"] for q in left} == {"gcp"}


def test_cli_refresh_without_credentials_leaves_every_option_unknown(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _quotas_file(env, None)
    result = _cli("quotas", "refresh", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(r["provider"], r["status"], r["rows"]) for r in doc["results"]] == [("aws", "skipped", 0),
                                                                                  ("gcp", "skipped", 0)]
    assert json.loads(_cli("quotas", "list", "--json").stdout)["quotas"] == []
    req = tmp_path / "big.json"
    req.write_text(json.dumps(_big(None, respect_quotas=True)))
    q = json.loads(_cli("quote", "--request", str(req), "--json").stdout)
    assert _cloud(q) and {o["quota"] for o in _cloud(q)} == {"unknown"}
    assert not any("quota" in g["reason"] for g in q["rejected"])


def test_cli_bad_quota_input_exits_2_naming_it(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _quotas_file(env, tmp_path / "missing.yaml")
    result = _cli("quotas", "list", "--json")
    assert result.exit_code == 2 and "GPUCOST_QUOTAS" in result.output and "missing.yaml" in result.output
    _quotas_file(env, None)
    result = _cli("quotas", "refresh", "--provider", "azure")
    assert result.exit_code == 2 and "--provider" in result.output


def test_http_quota_refresh_is_admin_only_and_stores(env: pytest.MonkeyPatch, db_url: str) -> None:
    from pricing.quotas import refresh as refresh_mod

    _quotas_file(env, None)
    env.setattr(refresh_mod, "READERS", {
        "aws": lambda _s: _FakeReader([QuotaLimit("aws", "us-west-2", AWS_P_ON_DEMAND, 192, "aws-service-quotas")]),
    })
    with TestClient(create_app(Settings(db_url=db_url, answer_cache=False))) as closed:
        assert closed.post("/v1/quotas/refresh").status_code == 403  # no admin token configured
    with TestClient(create_app(Settings(db_url=db_url, answer_cache=False, admin_token="s3cret"))) as c:
        assert c.post("/v1/quotas/refresh").status_code == 401
        r = c.post("/v1/quotas/refresh", headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and r.json() == {"results": [
            {"provider": "aws", "status": "ok", "rows": 1, "detail": None}]}
        assert [(q["region"], q["limit"]) for q in c.get("/v1/quotas").json()["quotas"]] == [("us-west-2", 192.0)]


def test_plans_respect_quotas_per_month(client: TestClient, env: pytest.MonkeyPatch) -> None:
    """96 vCPUs of P on demand in us-east-1 hold one p4d.24xlarge at a time: a month (730 h) fits only
    so many of its runs; with respect_quotas the rest go elsewhere."""
    _quotas_file(env, DATA / "p_family_96.yaml")
    body = {"jobs": [{"name": "big", "workload": BIG["workload"], "runs_per_month": 30}], "horizon_months": 1,
            "constraints": {**BIG["constraints"]}}
    free = client.post("/v1/plan", json=body).json()
    on_p4d = [a for a in free["assignments"] if a["instance_type"] == "p4d.24xlarge"]
    assert [a["runs"] for a in on_p4d] == [30]  # the cheapest rental takes every run
    hours = on_p4d[0]["hours_per_run"]
    assert 30 * hours > 730, "the job must need more than one instance-month for this test to mean anything"
    body["constraints"]["respect_quotas"] = True
    held = client.post("/v1/plan", json=body).json()
    runs = {(a["provider"], a["instance_type"]): a["runs"] for a in held["assignments"]}
    assert runs[("aws", "p4d.24xlarge")] == int(730 // hours)
    assert sum(runs.values()) == 30 and any(p == "gcp" for p, _ in runs)
    assert held["total_cost_usd"] > free["total_cost_usd"]
