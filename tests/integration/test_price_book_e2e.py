"""The embedded default and the user's price view end to end, over HTTP and in the CLI: a fresh
store's coverage, the price book (discounts, on-prem nodes, bad files), stale-price warnings,
dated currency from a rates file, electricity by region, and block storage in the bill."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from optimizer.errors import InvalidInput
from service.api.app import create_app
from service.cli import app as cli
from service.settings import Settings, get_settings

runner = CliRunner()
QLORA = {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8}
BOOK = """\
name: lab-2026
as_of: 2026-11-01
discounts: {aws: 0.5}
onprem:
  - {name: lab-4x4090, gpu: RTX4090, gpus_per_node: 4, gpu_hour_usd: 0.05, vcpus: 32, ram_gb: 128}
"""


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('book-e2e') / 'gpucost.sqlite'}"


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("book") / "lab.yaml"
    path.write_text(BOOK, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def plain(db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=db_url))) as c:
        yield c


@pytest.fixture(scope="module")
def booked(db_url: str, book: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=db_url, price_book=str(book), stale_after_days=1))) as c:
        yield c


def _cli(monkeypatch: pytest.MonkeyPatch, db_url: str, *args: str, **env: str):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    return runner.invoke(cli, list(args))


def test_a_fresh_store_knows_every_rentable_offer_each_sourced_and_dated(plain: TestClient) -> None:
    offers = plain.get("/v1/offers", params={"limit": 100000}).json()["offers"]
    counts = Counter(o["provider"] for o in offers)
    assert len(offers) >= 3000
    assert {"aws", "gcp", "azure", "lambda", "runpod", "vast", "alibaba", "autodl", "nebius", "colab"} <= set(counts)
    assert all(o["source"] and o["as_of"] for o in offers)
    east = {o["instance_type"] for o in offers if o["provider"] == "aws" and o["region"] == "us-east-1"}
    assert {"g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge",
            "g5.48xlarge", "g4dn.xlarge", "g6.xlarge", "p4d.24xlarge", "p5.48xlarge"} <= east


def _p4d(client: TestClient) -> dict:
    got = client.get("/v1/offers", params={"gpu": "A100", "gpu_count": 8, "provider": "aws", "region": "us-east-1"})
    return next(o for o in got.json()["offers"] if o["instance_type"] == "p4d.24xlarge")


def test_a_book_halving_aws_halves_p4d_and_names_itself(plain: TestClient, booked: TestClient) -> None:
    before, after = _p4d(plain), _p4d(booked)
    assert after["price_hour"] == pytest.approx(before["price_hour"] / 2, abs=1e-5)
    assert "pricebook:lab-2026" in after["source"] and "pricebook" not in before["source"]
    # A book changes the prices, so answers under it carry another snapshot id.
    w = {"workload": QLORA}
    assert plain.post("/v1/quote", json=w).json()["snapshot_id"] != booked.post("/v1/quote", json=w).json()["snapshot_id"]


def test_onprem_nodes_are_offers_and_win_a_qlora_quote(booked: TestClient) -> None:
    [lab] = booked.get("/v1/offers", params={"provider": "onprem"}).json()["offers"]
    assert (lab["gpu"], lab["gpu_count"], lab["price_hour"]) == ("RTX4090", 4, pytest.approx(0.20))
    q = booked.post("/v1/quote", json={"workload": QLORA, "constraints": {"include_local": False}}).json()
    assert (q["best"]["provider"], q["best"]["instance_type"]) == ("onprem", "lab-4x4090")


def test_the_book_reaches_breakeven_and_plan(plain: TestClient, booked: TestClient) -> None:
    req = {"workload": QLORA, "rent": {"provider": "aws", "instance_type": "p4d.24xlarge"}, "buy": {"gpu": "RTX4090"}}
    full = plain.post("/v1/breakeven", json=req).json()["rent"]["cost_per_run_usd"]
    half = booked.post("/v1/breakeven", json=req).json()["rent"]["cost_per_run_usd"]
    assert half < 0.6 * full
    plan = {"jobs": [{"name": "weekly", "workload": QLORA, "runs_per_month": 4}], "horizon_months": 6,
            "constraints": {"include_local": False}}
    assert booked.post("/v1/plan", json=plan).json()["total_cost_usd"] < plain.post("/v1/plan", json=plan).json()["total_cost_usd"]


def test_stale_providers_are_named_in_quote_warnings_json_and_markdown(booked: TestClient) -> None:
    req = {"workload": QLORA, "constraints": {"include_local": False, "providers": ["aws", "gcp", "runpod"]}}
    q = booked.post("/v1/quote", json=req).json()
    stale = [w for w in q["warnings"] if w.startswith("stale prices")]
    named = {p for p in ("aws", "gcp", "runpod") if any(f" {p} prices are" in w for w in stale)}
    assert named and named <= {o["provider"] for o in q["options"]}
    assert all("old (as of" in w for w in stale)
    md = booked.post("/v1/quote", params={"format": "markdown"}, json=req).text
    assert "**Warnings:**" in md and "stale prices" in md


def test_spot_far_below_on_demand_is_flagged(plain: TestClient) -> None:
    req = {"workload": {"model": "llama-3-8b", "method": "full", "tokens": 1e8},
           "constraints": {"allow_spot": True, "include_local": False, "providers": ["aws"], "gpus": ["A100"]}}
    # Issue 19: a spot price the answer would call implausible is rejected unless allowed ...
    q = plain.post("/v1/quote", json=req).json()
    assert not any(w.startswith("implausible price:") for w in q["warnings"])
    plausible = q["best"]["hourly_usd"]
    # ... and with allow_suspect_prices it may win, still flagged.
    req["constraints"]["allow_suspect_prices"] = True
    q = plain.post("/v1/quote", json=req).json()
    assert q["best"]["pricing"] == "spot" and q["best"]["hourly_usd"] < plausible
    assert any(w.startswith("implausible price: aws/") and "spot" in w for w in q["warnings"])


def test_cli_quote_with_the_book_and_stale_warnings(monkeypatch: pytest.MonkeyPatch, db_url: str, book: Path,
                                                    tmp_path: Path) -> None:
    req = tmp_path / "q.json"
    req.write_text(json.dumps({"workload": QLORA, "constraints": {"include_local": False}}), encoding="utf-8")
    r = _cli(monkeypatch, db_url, "quote", "--request", str(req), "--json",
             GPUCOST_PRICE_BOOK=str(book), GPUCOST_STALE_AFTER_DAYS="1")
    assert r.exit_code == 0, r.output
    q = json.loads(r.stdout)
    assert q["best"]["provider"] == "onprem"
    assert any(w.startswith("stale prices") for w in q["warnings"])


def test_a_missing_book_fails_naming_the_file(monkeypatch: pytest.MonkeyPatch, db_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    r = _cli(monkeypatch, db_url, "offers", "--gpu", "A100", GPUCOST_PRICE_BOOK=str(missing))
    assert r.exit_code == 2 and str(missing) in r.stderr
    r = _cli(monkeypatch, db_url, "serve", GPUCOST_PRICE_BOOK=str(missing))
    assert r.exit_code == 2 and str(missing) in r.stderr
    with pytest.raises(InvalidInput, match="nowhere.yaml"):
        create_app(Settings(db_url=db_url, price_book=str(missing)))


def test_an_invalid_book_fails_naming_the_file(monkeypatch: pytest.MonkeyPatch, db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("discounts: {aws: -1}\n", encoding="utf-8")
    r = _cli(monkeypatch, db_url, "offers", "--gpu", "A100", GPUCOST_PRICE_BOOK=str(bad))
    assert r.exit_code == 2 and str(bad) in r.stderr
    with pytest.raises(InvalidInput, match="bad.yaml"):
        create_app(Settings(db_url=db_url, price_book=str(bad)))


def test_a_rates_file_reprices_cny_offers_and_a_bad_one_names_itself(db_url: str, tmp_path: Path) -> None:
    rates = tmp_path / "rates.csv"
    rates.write_text("currency,rate_to_usd,as_of,source\nCNY,0.2,2023-06-01,test rate\n", encoding="utf-8")
    with TestClient(create_app(Settings(db_url=db_url, fx_file=str(rates)))) as c:
        ali = [o for o in c.get("/v1/offers", params={"provider": "alibaba"}).json()["offers"]
               if o["currency"] == "CNY" and o["as_of"].startswith("2023")]
    assert ali and all(o["price_hour"] == pytest.approx(o["price_hour_native"] * 0.2, abs=1e-5) for o in ali)
    # The file's rate is the newest on or before the prices' date (2023-06-17), so it is used and named.
    assert all("rate of 2023-06-01" in o["source"] for o in ali)
    bad = tmp_path / "bad.csv"
    bad.write_text("currency,rate_to_usd,as_of,source\nCNY,zero,2023-06-01,x\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="bad.csv"):
        create_app(Settings(db_url=db_url, fx_file=str(bad)))


def test_electricity_by_region_or_price_reaches_local_costs(plain: TestClient, monkeypatch: pytest.MonkeyPatch,
                                                            db_url: str) -> None:
    def local_energy(constraints: dict) -> float:
        q = plain.post("/v1/quote", json={"workload": QLORA, "constraints": {"gpus": ["RTX4090"], **constraints}}).json()
        local = next(o for o in [q["best"], *q["options"]] if o["kind"] == "local")
        return local["cost_breakdown"]["energy_usd"]

    iowa, england = local_energy({"electricity_region": "us-iowa"}), local_energy({"electricity_region": "us-new-england"})
    assert england == pytest.approx(iowa * 0.2961 / 0.1341, rel=1e-3)
    # An explicit price wins over a region.
    assert local_energy({"electricity_region": "us-iowa", "electricity_usd_per_kwh": 0.2961}) == pytest.approx(england, rel=1e-3)
    r = plain.post("/v1/quote", json={"workload": QLORA, "constraints": {"electricity_region": "mars"}})
    assert r.status_code == 422 and "electricity_region" in r.text
    r = _cli(monkeypatch, db_url, "quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8",
             "--gpu", "RTX4090", "--electricity-region", "us-new-england", "--json")
    assert r.exit_code == 0, r.output
    q = json.loads(r.stdout)
    local = next(o for o in [q["best"], *q["options"]] if o["kind"] == "local")
    assert local["cost_breakdown"]["energy_usd"] == pytest.approx(england, rel=1e-3)
    r = _cli(monkeypatch, db_url, "quote", "--model", "llama-3-8b", "--electricity-region", "mars")
    assert r.exit_code == 2 and "electricity_region" in r.stderr


def test_rentals_pay_for_the_jobs_disk_at_block_storage_prices(plain: TestClient) -> None:
    q = plain.post("/v1/quote", json={"workload": QLORA, "constraints": {"providers": ["aws"], "include_local": False}}).json()
    b = q["best"]
    storage = b["cost_breakdown"]["storage_usd"]
    assert storage > 0
    # EBS gp3 at 0.08 USD/GB-month for the run's hours: a few cents, never the bulk of the bill.
    assert storage < 0.1 * b["cost_usd"]


def test_a_small_gcp_job_rents_the_smallest_n1_host_it_fits(plain: TestClient) -> None:
    # GCP bills a T4 on any N1 shape within its limits: a BERT fine-tune needs few vCPUs, so it
    # must not pay for the 8-vCPU host a fixed pairing would give it.
    req = {"workload": {"model": "bert-base", "method": "full", "tokens": 1e7},
           "constraints": {"providers": ["gcp"], "gpus": ["T4"], "include_local": False}}
    best = plain.post("/v1/quote", json=req).json()["best"]
    assert best["instance_type"].endswith("+1xT4")
    same_zone = plain.get("/v1/offers", params={"provider": "gcp", "gpu": "T4", "gpu_count": 1,
                                                "region": best["region"]}).json()["offers"]
    fixed = [o["price_hour"] for o in same_zone if o["instance_type"] == "n1-highmem-8+1xT4"]
    assert fixed and best["hourly_usd"] < min(fixed)


def test_the_rates_file_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, db_url: str,
                                                     tmp_path: Path) -> None:
    rates = tmp_path / "rates.csv"
    rates.write_text("currency,rate_to_usd,as_of,source\nCNY,0.2,2023-06-01,test rate\n", encoding="utf-8")
    r = _cli(monkeypatch, db_url, "offers", "--provider", "alibaba", "--limit", "500", "--json",
             GPUCOST_FX_FILE=str(rates))
    assert r.exit_code == 0, r.stderr
    cny = [o for o in json.loads(r.stdout)["offers"] if o["currency"] == "CNY" and o["as_of"].startswith("2023")]
    assert cny and all("rate of 2023-06-01" in o["source"] for o in cny)
    bad = tmp_path / "bad.csv"
    bad.write_text("currency,rate_to_usd,as_of,source\nCNY,zero,2023-06-01,x\n", encoding="utf-8")
    r = _cli(monkeypatch, db_url, "offers", "--gpu", "A100", GPUCOST_FX_FILE=str(bad))
    assert r.exit_code == 2 and str(bad) in r.stderr
