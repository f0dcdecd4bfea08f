"""The CLI by its ecosystem's conventions: exit 2 naming the flag for every bad flag or value
(typer's own copies of click's errors included); --json with --markdown refused; switches as
--x/--no-x; help within 80 columns; the API's flags on every command where they mean something;
shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOB = ["--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8", "--batch", "2", "--seq-len", "2048",
       "--gradient-checkpointing"]
COMMANDS = ["estimate", "quote", "breakeven", "plan", "recommend", "frontier", "offers", "gpus", "models",
            "serve", "prices"]


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    db = tmp_path_factory.getbasetemp() / "cli-conventions.sqlite"
    monkeypatch.setenv("GPUCOST_DB_URL", f"sqlite:///{db}")
    from service.settings import get_settings

    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["quote", "--model", "llama-3-8b", "--batch", "x"], "--micro-batch-size"),
        (["quote", "--model", "llama-3-8b", "--seq-len", "abc"], "--seq-len"),
        (["quote", "--model", "llama-3-8b", "--seq-len", "0"], "--seq-len"),
        (["quote", "--model", "llama-3-8b", "--runs", "0"], "--runs"),
        (["quote", "--model", "llama-3-8b", "--bogus"], "--bogus"),
        (["quote", "--model", "llama-3-8b", "--spot", "true"], "--spot"),
        (["quote", "--model", "llama-3-8b", "--tokens"], "--tokens"),
        (["estimate", "--model", "llama-3-8b", "--gpus", "0"], "--gpus"),
        (["breakeven", *JOB, "--rent-gpu", "A100", "--buy-gpu", "RTX4090", "--runs-per-month", "many"],
         "--runs-per-month"),
        (["plan", "--json"], "--request"),
        (["quote", "--model", "llama-3-8b", "--json", "--markdown"], "--json"),
        (["estimate", "--model", "llama-3-8b", "--json", "--markdown"], "--json"),
        (["breakeven", *JOB, "--rent-gpu", "A100", "--buy-gpu", "RTX4090", "--json", "--markdown"], "--json"),
        (["recommend", *JOB, "--json", "--markdown"], "--json"),
        (["frontier", *JOB, "--json", "--markdown"], "--json"),
        (["plan", "--request", str(EXAMPLES / "plan.json"), "--json", "--markdown"], "--json"),
    ],
)
def test_bad_flag_or_value_exits_2_naming_the_flag(args: list[str], flag: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: ") or "Error" in result.stderr, result.stderr
    assert flag in result.stderr
    assert result.stdout == ""


def test_bad_field_in_a_request_file_names_the_field(tmp_path) -> None:  # type: ignore[no-untyped-def]
    req = tmp_path / "q.json"
    req.write_text(json.dumps({"workload": {"model": "llama-3-8b", "seq_len": -1}}))
    result = runner.invoke(app, ["quote", "--request", str(req)])
    assert result.exit_code == 2 and "workload.seq_len" in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_80_columns(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    wide = [line for line in result.stdout.splitlines() if len(line) > 80]
    assert not wide, wide
    assert "…" not in result.stdout  # no option name cut short


SHARED = ["--precision", "--optimizer", "--sharding", "--lora-rank", "--lora-targets", "--offload", "--stack"]
KWH = ["--electricity-usd-per-kwh", "--electricity-region"]


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("estimate", [*SHARED, "--global-batch-size", "--image-size", "--markdown"]),
        ("quote", [*SHARED, *KWH, "--region", "--max-gpus", "--spot / --no-spot", "--local / --no-local"]),
        ("frontier", [*SHARED, *KWH, "--region", "--max-gpus", "--spot / --no-spot"]),
        ("breakeven", [*SHARED, *KWH, "--region", "--spot / --no-spot", "--svg"]),
        ("recommend", [*SHARED, *KWH, "--deadline-hours"]),
        ("plan", [*KWH, "--region", "--max-gpus", "--spot / --no-spot", "--png", "--svg"]),
    ],
)
def test_the_apis_flags_are_on_every_command(command: str, flags: list[str]) -> None:
    help_text = runner.invoke(app, [command, "--help"], terminal_width=80).stdout
    missing = [f for f in flags if f not in help_text]
    assert not missing, missing


def test_switches_take_no_value_and_have_a_no_form() -> None:
    spot = json.loads(runner.invoke(app, ["quote", *JOB, "--spot", "--no-local", "--json"]).stdout)
    assert any(o["pricing"] == "spot" for o in spot["options"])
    assert all(o["kind"] == "cloud" for o in spot["options"])
    none = json.loads(runner.invoke(app, ["quote", *JOB, "--no-spot", "--json"]).stdout)
    assert all(o["pricing"] != "spot" for o in none["options"])


def test_constraint_flags_reach_the_answer() -> None:
    result = runner.invoke(app, ["quote", *JOB, "--region", "us-east-1", "--max-gpus", "1", "--no-local", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["options"] and all(o["region"] == "us-east-1" for o in doc["options"])
    assert all(o["gpus_per_node"] * o["nodes"] <= 1 for o in doc["options"])
    cheap = json.loads(runner.invoke(app, ["breakeven", *JOB, "--rent-gpu", "A10G", "--buy-gpu", "RTX4090",
                                           "--electricity-usd-per-kwh", "0", "--json"]).stdout)
    dear = json.loads(runner.invoke(app, ["breakeven", *JOB, "--rent-gpu", "A10G", "--buy-gpu", "RTX4090",
                                          "--electricity-usd-per-kwh", "1", "--json"]).stdout)
    assert cheap["buy"]["energy_per_run_usd"] == 0 < dear["buy"]["energy_per_run_usd"]
    spot = json.loads(runner.invoke(app, ["breakeven", *JOB, "--rent-gpu", "A10G", "--buy-gpu", "RTX4090",
                                          "--spot", "--region", "us-east-1", "--json"]).stdout)
    assert spot["rent"]["pricing"] == "spot" and spot["rent"]["region"] == "us-east-1"
    rec = [json.loads(runner.invoke(app, ["recommend", *JOB, "--budget", "5000", "--electricity-usd-per-kwh", kwh,
                                          "--json"]).stdout)["recommendation"]["energy_per_run_usd"]
           for kwh in ("0.1", "0.5")]
    assert rec[1] == pytest.approx(5 * rec[0], rel=1e-3)


def test_plan_flags_update_the_request_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    svg = tmp_path / "plan.svg"
    result = runner.invoke(app, ["plan", "--request", str(EXAMPLES / "plan.json"), "--horizon-months", "6",
                                 "--provider", "aws,gcp,local", "--svg", str(svg), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["horizon_months"] == 6 and len(doc["monthly"]) == 6
    assert {a["provider"] for a in doc["assignments"]} <= {"aws", "gcp", "local"}
    assert svg.read_bytes().startswith(b"<?xml")


def test_estimate_markdown() -> None:
    result = runner.invoke(app, ["estimate", *JOB, "--gpu", "RTX4090", "--markdown"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("## Estimate on 1x RTX4090") and "|---|" in result.stdout


def test_shell_completion() -> None:
    """The installed command completes commands and flags (what ``--install-completion`` wires up)."""
    gpucost = Path(sys.executable).with_name("gpucost")
    if not gpucost.exists():
        pytest.fail(f"{gpucost} missing: install the package (pip install -e .)")

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_GPUCOST_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - 1)}
        out = subprocess.run([str(gpucost)], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert sorted(complete("gpucost quo")) == ["quotas", "quote"]
    assert complete("gpucost bre") == ["breakeven"]
    assert set(complete("gpucost quote --electricity-u")) == {"--electricity-usd-per-kwh"}
    script = subprocess.run([str(gpucost)], env={**os.environ, "_GPUCOST_COMPLETE": "source_bash"},
                            capture_output=True, text=True, timeout=60)
    assert "_gpucost_completion" in script.stdout and "complete " in script.stdout
