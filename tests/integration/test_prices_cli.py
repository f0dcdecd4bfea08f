"""Prices on the command line: import, offers, status, history and refresh."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from optimizer.errors import ProviderError
from pricing.adapters.skypilot_csv import load_skypilot
from service.api.app import create_app
from service.cli import app
from service.settings import Settings
from tests.integration._pricestore import FakeSource, catalog_offers

runner = CliRunner()


@pytest.fixture
def db_url(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    return tmp_db_url


def _csv_price(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 and not math.isnan(value) else None


def test_import_skypilot_then_offers_cheapest_first(db_url: str, reference_dir: Path) -> None:
    catalog = reference_dir / "skypilot-catalog"
    result = runner.invoke(app, ["prices", "import", "--format", "skypilot", str(catalog), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    per_cloud = Counter(o.provider for o in load_skypilot(catalog))
    assert {r["provider"]: r["rows"] for r in doc["imported"]} == dict(per_cloud)
    assert set(per_cloud) == {p.parent.name for p in catalog.glob("*/vms.csv")}
    assert all(r["source"].startswith("skypilot-catalog:") for r in doc["imported"])

    out = runner.invoke(app, ["offers", "--gpu", "A100", "--count", "8", "--json"])
    assert out.exit_code == 0, out.output
    offers = json.loads(out.stdout)["offers"]
    prices = [o["price_hour"] for o in offers]
    assert prices == sorted(prices)

    # Whole-machine rows of the CSVs themselves. GCP rows price the accelerators alone (the host
    # VM is a separate row), so a GCP offer may never be cheaper than its accelerator row.
    whole: list[float] = []
    gcp_accel: dict[str, float] = {}
    for path in catalog.glob("*/vms.csv"):
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row["AcceleratorName"] != "A100" or _csv_price(row["AcceleratorCount"]) != 8:
                    continue
                price = _csv_price(row["Price"])
                if price is None:
                    continue
                if path.parent.name == "gcp":
                    gcp_accel[row["AvailabilityZone"]] = price
                else:
                    whole.append(price)
    assert prices[0] == min(whole)
    for o in offers:
        if o["provider"] == "gcp":
            assert o["price_hour"] > gcp_accel[o["zone"]]

    with TestClient(create_app(Settings(db_url=db_url))) as c:
        api = c.get("/v1/offers", params={"gpu": "A100", "gpu_count": 8}).json()
    assert api == json.loads(out.stdout)


def test_offers_table_and_bad_input(db_url: str) -> None:
    table = runner.invoke(app, ["offers", "--gpu", "RTX4090", "--limit", "3"])
    assert table.exit_code == 0, table.output
    assert "cheapest first" in table.stdout and "RTX4090" in table.stdout
    bad = runner.invoke(app, ["offers", "--gpu", "A1000"])
    assert bad.exit_code == 2 and "did you mean" in bad.stderr
    fmt = runner.invoke(app, ["prices", "import", "--format", "infracost", "x.csv"])
    assert fmt.exit_code == 2 and "unsupported catalog format" in fmt.stderr


def test_status_and_history_match_the_api(db_url: str) -> None:
    status = runner.invoke(app, ["prices", "status", "--json"])
    assert status.exit_code == 0, status.output
    history = runner.invoke(app, ["prices", "history", "--instance", "p4d.24xlarge", "--region", "us-east-1", "--json"])
    assert history.exit_code == 0, history.output
    with TestClient(create_app(Settings(db_url=db_url))) as c:
        api_status = c.get("/v1/prices/status").json()
        query = {"instance_type": "p4d.24xlarge", "region": "us-east-1"}
        api_history = c.get("/v1/prices/history", params=query).json()
    drop_age = [{k: v for k, v in p.items() if k != "age_hours"} for p in json.loads(status.stdout)["providers"]]
    assert drop_age == [{k: v for k, v in p.items() if k != "age_hours"} for p in api_status["providers"]]
    assert json.loads(history.stdout) == api_history and api_history["points"]
    table = runner.invoke(app, ["prices", "status"])
    assert table.exit_code == 0 and "aws" in table.stdout


def test_refresh_reports_rows_and_fails_loudly(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lam = catalog_offers("lambda")
    by_source = defaultdict(lambda: None)  # type: ignore[var-annotated]
    by_source.update({
        "lambda": FakeSource("lambda", lam).factory(),
        "vast": FakeSource("vast", [], faults=[ProviderError("vast", "HTTP 500")]).factory(),
    })
    monkeypatch.setattr("pricing.refresh.registered_sources", lambda: dict(by_source))
    ok = runner.invoke(app, ["prices", "refresh", "--provider", "lambda", "--json"])
    assert ok.exit_code == 0, ok.output
    (result,) = json.loads(ok.stdout)["results"]
    assert result["status"] == "updated" and result["rows"] == len(lam)

    failed = runner.invoke(app, ["prices", "refresh", "--provider", "lambda,vast"])
    assert failed.exit_code == 1
    assert "unchanged" in failed.stdout and "HTTP 500" in failed.stdout
    status = json.loads(runner.invoke(app, ["prices", "status", "--json"]).stdout)
    assert "HTTP 500" in next(p for p in status["providers"] if p["provider"] == "vast")["last_error"]


def test_import_as_of_dates_the_prices_and_reports_skips(db_url: str, reference_dir: Path) -> None:
    catalog = reference_dir / "skypilot-catalog" / "lambda" / "vms.csv"
    result = runner.invoke(app, ["prices", "import", str(catalog), "--as-of", "2025-11-30", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["skipped"] == {"no GPU (CPU-only row)": 34}
    status = json.loads(runner.invoke(app, ["prices", "status", "--json"]).stdout)
    lam = next(p for p in status["providers"] if p["provider"] == "lambda")
    assert lam["as_of"].startswith("2025-11-30") and lam["stale"] is True
    bad = runner.invoke(app, ["prices", "import", str(catalog), "--as-of", "last year"])
    assert bad.exit_code == 2 and "as_of" in bad.stderr
