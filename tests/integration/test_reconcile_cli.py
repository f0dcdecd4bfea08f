"""Quoted vs billed through the ``gpucost`` CLI: runs add|list, reconcile (JSON equal to the API's
shape, Markdown), spend --csv / --parquet loading in pandas, exit 2 naming the file's column."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import app
from tests.integration._bills import NOW, UNTAGGED_USD, RunUse, Scenario, focus_bill, gcp_bill

runner = CliRunner()
WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e8}


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('cli-reconcile') / 'gpucost.sqlite'}"


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    from service.settings import get_settings

    get_settings.cache_clear()


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, db_url: str) -> dict[str, dict[str, object]]:
    """Two runs: one saved from a quote request file (``runs add``), one from ``quote`` with save_run."""
    import os

    from service.settings import get_settings

    os.environ["GPUCOST_DB_URL"] = db_url
    get_settings.cache_clear()
    tmp = tmp_path_factory.mktemp("req")
    try:
        add = tmp / "run.json"
        add.write_text(json.dumps({"run_id": "cli-1", "team": "nlp", "job": "sft",
                                   "quote": {"workload": WORKLOAD, "constraints": {"providers": ["gcp"], "gpus": ["L4"]}}}))
        r = invoke("runs", "add", "--request", str(add), "--json")
        assert r.exit_code == 0, r.output
        first = json.loads(r.stdout)
        q = tmp / "quote.json"
        q.write_text(json.dumps({"workload": WORKLOAD, "constraints": {"providers": ["gcp"], "gpus": ["L4"]},
                                 "save_run": {"run_id": "cli-2", "team": "nlp"}}))
        r = invoke("quote", "--request", str(q), "--json")
        assert r.exit_code == 0, r.output
        quote = json.loads(r.stdout)
        assert quote["saved_run"]["tag"] == {"gpucost-run-id": "cli-2"}
        return {"cli-1": first["option"], "cli-2": quote["best"]}
    finally:
        del os.environ["GPUCOST_DB_URL"]


def test_runs_list_json(saved: dict[str, dict[str, object]]) -> None:
    r = invoke("runs", "list", "--json")
    assert r.exit_code == 0, r.output
    runs = json.loads(r.stdout)["runs"]
    assert [x["run_id"] for x in runs] == ["cli-1", "cli-2"]
    assert all(x["team"] == "nlp" and x["option"]["gpu"] == "L4" for x in runs)
    table = invoke("runs", "list")
    assert table.exit_code == 0 and "cli-1" in table.stdout and "gpucost-run-id" in table.stdout


def test_reconcile_spend_and_bad_files(saved: dict[str, dict[str, object]], tmp_path: Path, db_url: str) -> None:
    import pandas as pd

    s = Scenario([RunUse(rid, float(o["hourly_usd"]), float(o["hours"]) * 1.5, f"gce-{rid}")  # type: ignore[arg-type]
                  for rid, o in saved.items()])
    data, billed, _ = gcp_bill(s)
    bill = tmp_path / "gcp.csv"
    bill.write_bytes(data)
    r = invoke("reconcile", str(bill), "--format", "gcp-billing", "--now", NOW, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {"runs", "unmatched_usd", "billed_total_usd", "effective_total_usd", "provisional_usd", "calibration"} <= set(doc)
    assert doc["billed_total_usd"] == round(float(billed), 2)
    assert doc["unmatched_usd"] == round(UNTAGGED_USD, 2)
    by = {b["run_id"]: b for b in doc["runs"]}
    assert by["cli-2"]["cause"] == "ran longer" and by["cli-2"]["billed_hours"] == pytest.approx(
        float(saved["cli-2"]["hours"]) * 1.5, rel=1e-4)  # type: ignore[arg-type]
    (learnt,) = doc["calibration"]
    assert learnt["runs"] == ["cli-1", "cli-2"] and learnt["hours_factor"] == pytest.approx(1.25, abs=2e-4)  # 1 + 2/4 x 0.5
    # The next CLI quote applies it; the quick path (a prepared reader: sqlite3, no SQLAlchemy) reads the same.
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"workload": WORKLOAD, "constraints": {"providers": ["gcp"], "gpus": ["L4"]}}))
    quoted = json.loads(invoke("quote", "--request", str(q), "--json").stdout)["best"]
    assert quoted["calibration"]["runs"] == ["cli-1", "cli-2"]
    from service.bills import quote_calibration
    from service.schemas import QuoteRequest

    class PreparedLike:
        db_file = Path(db_url.removeprefix("sqlite:///"))

    req = QuoteRequest.model_validate(json.loads(q.read_text()))
    assert quote_calibration(req, PreparedLike())[("gcp", "L4")].runs == ["cli-1", "cli-2"]
    assert quote_calibration(req.model_copy(update={"use_calibration": False}), PreparedLike()) == {}
    md = invoke("reconcile", str(bill), "--markdown", "--now", NOW)
    assert md.exit_code == 0 and "| cli-1 | nlp |" in md.stdout

    csv = invoke("spend", "--by", "team", "--csv")
    assert csv.exit_code == 0, csv.output
    frame = pd.read_csv(io.StringIO(csv.stdout))
    assert {"BilledCost", "EffectiveCost", "ChargePeriodStart", "ChargePeriodEnd", "ServiceProviderName",
            "ResourceId", "Tags"} <= set(frame.columns)
    assert frame["BilledCost"].sum() == pytest.approx(float(billed), abs=0.02)
    assert json.loads(frame.set_index("x_Team").loc["nlp", "Tags"]) == {"team": "nlp"}
    out = tmp_path / "spend.parquet"
    pq = invoke("spend", "--by", "run", "--parquet", "--out", str(out))
    assert pq.exit_code == 0, pq.output
    runs = pd.read_parquet(out)
    assert set(runs["x_RunId"]) == {"cli-1", "cli-2", "(unmatched)"}

    # A bad file: exit 2, one line naming the file and the column, nothing stored.
    broken = tmp_path / "broken.csv"
    frame_bad = pd.read_csv(io.BytesIO(focus_bill(s)[0]), dtype=str, keep_default_na=False)
    broken.write_text(frame_bad.drop(columns=["BilledCost"]).to_csv(index=False))
    bad = invoke("reconcile", str(broken), "--format", "focus")
    assert bad.exit_code == 2
    assert str(broken) in bad.stderr and "BilledCost" in bad.stderr and "Traceback" not in bad.stderr
    neg = frame_bad.copy()
    neg.loc[0, "ConsumedQuantity"] = "-1"
    broken.write_text(neg.to_csv(index=False))
    bad = invoke("reconcile", str(broken))
    assert bad.exit_code == 2 and "ConsumedQuantity" in bad.stderr and "negative" in bad.stderr
    after = pd.read_csv(io.StringIO(invoke("spend", "--by", "team", "--csv").stdout))
    assert after["BilledCost"].sum() == pytest.approx(frame["BilledCost"].sum())
    assert invoke("reconcile", str(tmp_path / "missing.csv")).exit_code == 2
    assert invoke("reconcile", str(bill), "--format", "xls").exit_code == 2
    assert invoke("spend", "--by", "week").exit_code == 2
    assert invoke("spend", "--parquet").exit_code == 2
