"""The request files in examples/ (named in the README) stay valid and answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("estimate", "estimate.json"),
        ("quote", "quote.json"),
        ("breakeven", "breakeven.json"),
        ("plan", "plan.json"),
        ("plan", "plan-us-clouds.json"),
        ("plan", "plan-team.json"),
    ],
)
def test_example_answers(command: str, name: str) -> None:
    result = runner.invoke(app, [command, "--request", str(EXAMPLES / name), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    if command == "quote":
        assert doc["best"] is not None and doc["solver"]["status"] == "Optimal"
    if command == "plan":
        assert doc["solver"]["status"] == "Optimal"
        assert doc["total_cost_usd"] <= doc["all_cloud_cost_usd"] + 1e-6
    if command == "estimate":
        assert doc["fits"] is True


def test_every_example_is_covered() -> None:
    assert {p.name for p in EXAMPLES.glob("*.json")} == {
        "estimate.json", "quote.json", "breakeven.json", "plan.json", "plan-us-clouds.json", "plan-team.json",
    }


def test_flags_override_the_request_file() -> None:
    """``--runs`` and constraint flags update the file's request; unset flags leave it alone."""
    base = json.loads(runner.invoke(app, ["quote", "--request", str(EXAMPLES / "quote.json"), "--json"]).stdout)
    result = runner.invoke(
        app, ["quote", "--request", str(EXAMPLES / "quote.json"), "--runs", "2", "--no-local", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert base["runs"] == 4 and doc["runs"] == 2
    assert all(o["kind"] == "cloud" for o in doc["options"])
    # The file's other constraints still hold: its 24 h deadline and 8-GPU cap.
    assert all(o["hours"] <= 24 and o["gpus_per_node"] * o["nodes"] <= 8 for o in doc["options"])
    est = runner.invoke(
        app, ["estimate", "--request", str(EXAMPLES / "estimate.json"), "--gpu", "RTX4090", "--batch", "1", "--json"]
    )
    assert est.exit_code == 0, est.output
    e = json.loads(est.stdout)
    assert e["gpu"] == "RTX4090" and e["gpu_vram_gb"] == 24
