"""CLI: the same answers as the API, one JSON document with --json, exit 2 on bad input."""

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
WORKLOAD = {"model": "qwen2.5-7b", "method": "lora", "micro_batch_size": 2, "seq_len": 1024, "tokens": 5e7}


def test_estimate_json_matches_api(tmp_path: Path, tmp_db_url: str) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"workload": WORKLOAD, "gpu": "A100-80GB", "gpu_count": 1}))
    result = runner.invoke(app, ["estimate", "--request", str(req), "--gpu", "A100-80GB", "--json"])
    assert result.exit_code == 0, result.output
    cli_doc = json.loads(result.stdout)
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        api_doc = c.post("/v1/estimate", json={"workload": WORKLOAD, "gpu": "A100-80GB"}).json()
    assert cli_doc == api_doc


def test_estimate_from_flags_and_bare_workload(tmp_path: Path) -> None:
    flags = runner.invoke(app, ["estimate", "--model", "bert-base", "--batch", "16", "--seq-len", "128",
                                "--gpu", "RTX3060", "--json"])
    assert flags.exit_code == 0, flags.output
    bare = tmp_path / "w.json"
    bare.write_text(json.dumps({"model": "bert-base", "micro_batch_size": 16, "seq_len": 128}))
    from_file = runner.invoke(app, ["estimate", "--request", str(bare), "--gpu", "RTX3060", "--json"])
    assert from_file.exit_code == 0, from_file.output
    assert json.loads(flags.stdout) == json.loads(from_file.stdout)


def test_human_output_is_a_table() -> None:
    result = runner.invoke(app, ["estimate", "--model", "gpt2", "--gpu", "T4"])
    assert result.exit_code == 0, result.output
    assert "total per GPU" in result.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["estimate", "--model", "gpt2", "--gpu", "RTX 4099"], "did you mean"),
        (["estimate", "--model", "gpt-9000", "--gpu", "T4"], "unknown model"),
        (["estimate", "--model", "gpt2", "--tokens", "1e30", "--gpu", "T4"], "tokens"),
        (["estimate", "--gpu", "T4"], "--request"),
        (["estimate", "--request", "/nonexistent/req.json"], "cannot read"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert needle in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_malformed_request_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["estimate", "--request", str(bad), "--gpu", "T4"])
    assert result.exit_code == 2
    assert "not valid JSON" in result.stderr


def test_gpus_json_is_one_document() -> None:
    result = runner.invoke(app, ["gpus", "--json"])
    assert result.exit_code == 0
    assert "RTX4090" in {g["name"] for g in json.loads(result.stdout)["gpus"]}
