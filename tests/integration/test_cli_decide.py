"""CLI decision commands: quote (file and flags, --json / --markdown / table), breakeven with a
chart, plan, recommend, frontier; JSON equal to the API's; exit 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
WORKLOAD = {"model": "llama-3-8b", "method": "qlora", "micro_batch_size": 2, "seq_len": 2048,
            "gradient_checkpointing": True, "tokens": 1e8}
FLAGS = ["--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8", "--micro-batch-size", "2",
         "--seq-len", "2048", "--gradient-checkpointing"]


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('cli-decide') / 'gpucost.sqlite'}"


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    from service.settings import get_settings

    get_settings.cache_clear()


def invoke(*args: str):  # type: ignore[no-untyped-def]
    result = runner.invoke(app, list(args))
    return result


def test_quote_json_equals_api(tmp_path: Path, db_url: str) -> None:
    req = tmp_path / "q.json"
    body = {"workload": WORKLOAD, "runs": 4, "top": 5}
    req.write_text(json.dumps(body))
    result = invoke("quote", "--request", str(req), "--json")
    assert result.exit_code == 0, result.output
    cli = json.loads(result.stdout)
    with TestClient(create_app(Settings(db_url=db_url))) as c:
        api = c.post("/v1/quote", json=body).json()
    for doc in (cli, api):
        doc["solver"].pop("seconds")
    assert cli == api


def test_quote_from_flags_table_and_markdown() -> None:
    table = invoke("quote", *FLAGS)
    assert table.exit_code == 0, table.output
    assert "chosen" in table.stdout and "solver" in table.stdout
    md = invoke("quote", *FLAGS, "--markdown")
    assert md.exit_code == 0, md.output
    assert md.stdout.startswith("## GPU quote") and "| # | where |" in md.stdout and "(chosen)" in md.stdout
    js = json.loads(invoke("quote", *FLAGS, "--gpu", "A100,A100-80GB", "--no-local", "--json").stdout)
    assert js["best"]["gpu"] in ("A100", "A100-80GB")
    assert all(o["kind"] == "cloud" for o in js["options"])


def test_quote_deadline_flag_infeasible() -> None:
    result = invoke("quote", *FLAGS, "--deadline-hours", "0.01", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["best"] is None and doc["rejected"]


@pytest.mark.parametrize(
    "args",
    [
        ("quote", "--model", "llama-3-8b", "--gpu", "NotAGpu"),
        ("quote", "--model", "llama-3-8b", "--tokens", "-1"),
        ("quote",),
        ("breakeven", *FLAGS, "--rent-gpu", "A100", "--buy-build", "no-such-build"),
    ],
)
def test_bad_input_exit_2(args: tuple[str, ...]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error:") and len(result.stderr.strip().splitlines()) == 1


def test_breakeven_png_and_json(tmp_path: Path) -> None:
    png = tmp_path / "be.png"
    result = invoke("breakeven", *FLAGS, "--rent-gpu", "A100-80GB", "--buy-gpu", "RTX4090", "--png", str(png))
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:4] == b"\x89PNG" and "break-even" in result.stdout
    doc = json.loads(invoke("breakeven", *FLAGS, "--rent-gpu", "A100-80GB", "--buy-gpu", "RTX4090",
                            "--runs-per-month", "4", "--json").stdout)
    assert doc["runs_per_month"] == 4 and doc["buy"]["gpu"] == "RTX4090"
    md = invoke("breakeven", *FLAGS, "--rent-gpu", "A100-80GB", "--buy-gpu", "RTX4090", "--markdown")
    assert "## Rent or buy" in md.stdout


def test_plan_request_file(tmp_path: Path) -> None:
    req = tmp_path / "plan.json"
    req.write_text(json.dumps({
        "jobs": [{"name": "weekly-qlora", "workload": WORKLOAD, "runs_per_month": 4, "deadline_hours": 48}],
        "horizon_months": 12,
    }))
    doc = json.loads(invoke("plan", "--request", str(req), "--json").stdout)
    assert doc["solver"]["status"] == "Optimal" and len(doc["monthly"]) == 12
    md = invoke("plan", "--request", str(req), "--markdown")
    assert "## Portfolio plan" in md.stdout and "all cloud" in md.stdout


def test_recommend_and_frontier() -> None:
    rec = json.loads(invoke("recommend", *FLAGS, "--budget", "5000", "--json").stdout)
    assert rec["recommendation"]["price_usd"] <= 5000
    human = invoke("recommend", *FLAGS)
    assert human.exit_code == 0 and "best rental" in human.stdout
    fr = json.loads(invoke("frontier", *FLAGS, "--json").stdout)
    assert len(fr["points"]) >= 2
