"""What the terminal tables, the Markdown and the charts show, through the CLI and HTTP: the quote's
warnings and each option's price age in the table; HTML in a job's name escaped in Markdown and never
read as rich markup in the terminal; a plan's identical months collapsed, without ``$-0.00``; region
labels without empty parts; ``on-demand`` everywhere; a break-even past the build's life said so
alike in the CLI and the Markdown; the break-even chart's legend off its lines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
EVIL = "<img src=x onerror=alert(1)>"
WORKLOAD = {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8, "micro_batch_size": 2, "seq_len": 2048,
            "gradient_checkpointing": True}
FLAGS = ["--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8"]
# Three years of one job that buys a 4090 box: month 1 buys, 2-35 only pay energy, 36 sells it.
PLAN = {"jobs": [{"name": EVIL, "workload": WORKLOAD, "runs_per_month": 8, "deadline_hours": 48}],
        "horizon_months": 36, "constraints": {"providers": ["aws", "gcp", "local"]}}
# Renting an A100-80GB against buying a 4090 at 4 runs a month breaks even only after the box's life
# (the README's cadence table: 376 runs, 93.8 months).
BREAKEVEN = {"workload": {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8}, "rent": {"gpu": "A100-80GB"},
             "buy": {"gpu": "RTX4090"}, "runs_per_month": 4}


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('render') / 'gpucost.sqlite'}"


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    from service.settings import get_settings

    get_settings.cache_clear()


@pytest.fixture(scope="module")
def client(db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=db_url))) as c:
        yield c


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _no_raw_html(text: str) -> None:
    assert "<img" not in text and "onerror=alert(1)>" not in text, text
    assert not re.search(r"<\s*[a-zA-Z/!]", text), "a raw tag"


def _plan_markdown_checks(md: str) -> None:
    _no_raw_html(md)
    assert "&lt;img src=x onerror=alert(1)&gt;" in md  # the name is shown, as text
    assert "$-" not in md  # no "$-0.00", and credits read "-$1,172.14"
    monthly = md.split("Monthly cost:")[1].split("\n\n")[1].splitlines()[2:]
    spans = [row.split("|")[1].strip() for row in monthly]
    # Identical months are one row; a purchase and a sale stand out: 1, 2-35, 36.
    assert spans == ["1", "2-35", "36"], monthly
    runs = md.split("Where the runs go")[1].split("\n\n")[1].splitlines()[2:]
    assert len(runs) == 1 and runs[0].startswith("| 1-36 |") and "local build `" in runs[0], runs
    assert "on_demand" not in md


def test_plan_markdown_over_http_escapes_names_and_collapses_months(client: TestClient) -> None:
    r = client.post("/v1/plan?format=markdown", json=PLAN)
    assert r.status_code == 200, r.text
    _plan_markdown_checks(r.text)


def test_plan_markdown_and_table_in_the_cli(tmp_path: Path) -> None:
    req = tmp_path / "plan.json"
    req.write_text(json.dumps(PLAN))
    _plan_markdown_checks(invoke("plan", "--request", str(req), "--markdown"))
    # The terminal shows the name as typed (rich markup is not read from it) and one row per stretch.
    evil = dict(PLAN, jobs=[dict(PLAN["jobs"][0], name="[red]x[/] [/]")])
    req.write_text(json.dumps(evil))
    table = invoke("plan", "--request", str(req))
    assert "[red]x[/] [/]" in table
    assert re.search(r"1-36\s+│", table) and not re.search(r"│ 2\s+│", table)


def test_quote_markdown_shows_ages_labels_and_no_raw_html(client: TestClient) -> None:
    body = {"workload": {"model": {"params_b": 1.3, "name": EVIL}, "tokens": 1e8}}
    r = client.post("/v1/quote?format=markdown", json=body)
    assert r.status_code == 200, r.text
    md = r.text
    _no_raw_html(md)
    assert "| price as of |" in md
    rows = [line for line in md.splitlines() if re.match(r"\| \d+", line)]
    assert rows and all(re.search(r"\| \d{4}-\d\d-\d\d, (today|\d+ days? old|\d+ months old) \|$", row) for row in rows), rows
    assert all("on_demand" not in row and "/, " not in row for row in rows), rows
    assert "**Warnings:**" in md and "stale prices" in md
    cli = invoke("quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8", "--markdown")
    _no_raw_html(cli)
    rows = [line for line in cli.splitlines() if re.match(r"\| \d+", line)]
    assert any("vast/CN, AS" in row for row in rows), "the bundled catalog's Vast row with no city, labelled cleanly"
    assert all("on_demand" not in row and "/, " not in row for row in rows) and "| price as of |" in cli


def test_quote_table_in_the_terminal_shows_warnings_and_price_ages() -> None:
    out = invoke("quote", *FLAGS)
    flat = " ".join(out.split())  # rich wraps long lines at the console's width
    doc = json.loads(invoke("quote", *FLAGS, "--json"))
    # Every warning JSON and Markdown carry is in the table's output: stale prices with their age.
    assert doc["warnings"] and all(f"warning: {' '.join(w.split())}" in flat for w in doc["warnings"]), out
    assert any("stale prices" in w and "months old" in w for w in doc["warnings"])
    # Each option's row ends with its price's age (the bundled catalog's are months old).
    rows = [line for line in out.splitlines() if re.match(r"│\s+\d+( \*)? │", line)]
    assert "price age" in out and rows
    assert all(re.search(r"│\s+(today|\d+ d|\d+ mo) │$", row) for row in rows), rows
    assert "/, " not in out and "on_demand" not in out
    # A price converted from another currency says at which dated rate.
    autodl = invoke("quote", *FLAGS, "--provider", "autodl", "--no-local")
    assert re.search(r"warning: converted price: autodl/\S+ is priced in CNY; USD at [\d.]+ USD/CNY", autodl), autodl


def test_breakeven_past_the_builds_life_reads_the_same_in_the_cli_and_markdown(client: TestClient) -> None:
    doc = client.post("/v1/breakeven", json=BREAKEVEN).json()
    assert doc["within_lifetime"] is False and doc["breakeven_runs"] is not None, doc
    life = f"past its {doc['buy']['lifetime_months']}-month life"
    md = client.post("/v1/breakeven?format=markdown", json=BREAKEVEN).text
    assert f"**Break-even:** {life}." in md
    args = [*FLAGS, "--rent-gpu", "A100-80GB", "--buy-gpu", "RTX4090", "--runs-per-month", "4"]
    assert f"break-even: {life}" in invoke("breakeven", *args)
    assert f"**Break-even:** {life}." in invoke("breakeven", *args, "--markdown")
    assert f"{doc['breakeven_runs']} runs" not in md.split("Sensitivity:")[0]


def test_breakeven_chart_legend_sits_off_the_lines(client: TestClient) -> None:
    svg = client.post("/v1/breakeven?format=svg", json=BREAKEVEN).text
    axes = re.search(r'id="patch_2">\s*<path d="([^"]+)"', svg)
    assert axes, "the axes' background rectangle"
    axes_bottom = max(float(y) for y in re.findall(r"[ML] [\d.]+ ([\d.]+)", axes.group(1)))
    legend = svg[svg.index('id="legend_1"'):]
    legend = legend[:legend.index('id="axes_') if 'id="axes_' in legend else len(legend)]
    samples = [float(y) for path in re.findall(r'<g id="line2d_\d+">\s*<path d="([^"]+)"', legend)
               for y in re.findall(r"[ML] [\d.]+ ([\d.]+)", path)]
    texts = [float(y) for y in re.findall(r'<g transform="translate\([\d.]+ ([\d.]+)\)', legend)]
    assert len(samples) >= 3 and texts, legend[:500]
    # SVG y grows downwards: every legend entry lies below the plotting area, none on a line.
    assert min(samples + texts) > axes_bottom, (min(samples + texts), axes_bottom)


def test_a_quote_saved_for_a_team_named_like_a_tag_has_no_raw_html(client: TestClient, tmp_path: Path) -> None:
    """A Markdown quote for a job and team named ``<img src=x onerror=alert(1)>``, over HTTP and
    through the CLI's --markdown: the names are in the text, escaped, and no tag is."""
    body = {"workload": {"model": "gpt2", "tokens": 1e7},
            "save_run": {"run_id": "r-html-1", "team": EVIL, "job": EVIL}}
    md = client.post("/v1/quote?format=markdown", json=body).text
    _no_raw_html(md)
    assert "Saved as planned run r-html-1 for team &lt;img src=x onerror=alert(1)&gt;." in md
    req = tmp_path / "quote.json"
    req.write_text(json.dumps(dict(body, save_run=dict(body["save_run"], run_id="r-html-2"))))
    cli = invoke("quote", "--request", str(req), "--markdown")
    _no_raw_html(cli)
    assert "planned run r-html-2 for team &lt;img src=x onerror=alert(1)&gt;" in cli
