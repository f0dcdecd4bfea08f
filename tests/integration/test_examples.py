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
