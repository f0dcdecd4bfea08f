"""Quoted vs billed in Markdown never passes the caller's or the bill's text out raw: a team named
``<img src=x onerror=alert(1)>`` and a bill line whose service and resource id are HTML come out
as entities, over HTTP (``POST /v1/reconcile`` with ``Accept: text/markdown``) and through the CLI
(``gpucost reconcile FILE --markdown``); and the risk and commitment tables write a catalog's
region without its empty parts (``service.render.labels.region_label``)."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.settings import Settings
from tests.integration._bills import NOW, RunUse, Scenario, focus_bill

TOKEN = "escape-admin"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
EVIL_TEAM = "<img src=x onerror=alert(1)>"
EVIL_SERVICE = "<script>alert(2)</script>"
EVIL_RESOURCE = "<img src=y onerror=alert(3)>"
WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e8}
RAW_TAG = re.compile(r"<\s*(img|script)\b", re.I)


def _bill(best: dict[str, object]) -> bytes:
    """A FOCUS bill for the run whose untagged line names an HTML service and resource."""
    use = RunUse(run_id="evil-r1", hourly_usd=float(best["hourly_usd"]),  # type: ignore[arg-type]
                 instance_hours=round(float(best["hours"]) * 1.1, 6), resource_id="i-0evil")  # type: ignore[arg-type]
    data, _, _ = focus_bill(Scenario([use]))
    frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    untagged = frame["ResourceId"] == "i-0untagged"
    assert untagged.sum() == 1
    frame.loc[untagged, "ServiceName"] = EVIL_SERVICE
    frame.loc[untagged, "ResourceId"] = EVIL_RESOURCE
    return frame.to_csv(index=False).encode()


def _assert_escaped(md: str) -> None:
    assert "## Quoted vs billed" in md
    assert not RAW_TAG.search(md), md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md  # the team, as text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in md and "&lt;img src=y onerror=alert(3)&gt;" in md
    assert re.search(r"^\| evil-r1 \| &lt;img src=x onerror=alert\(1\)&gt; \| [\d,.]+ \|", md, re.M), md


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A store with one run of the evil team (saved from a quote over HTTP) and its bill file."""
    tmp = tmp_path_factory.mktemp("escape")
    db_url = f"sqlite:///{tmp / 'gpucost.sqlite'}"
    with TestClient(create_app(Settings(db_url=db_url, admin_token=TOKEN))) as c:
        r = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": {"providers": ["aws"], "gpus": ["A10G"]},
                                      "save_run": {"run_id": "evil-r1", "team": EVIL_TEAM}})
        assert r.status_code == 200, r.text
        best = r.json()["best"]
    bill = tmp / "bill.csv"
    bill.write_bytes(_bill(best))
    return db_url, bill


def test_reconcile_markdown_over_http_escapes_team_service_and_resource(stored: tuple[str, Path]) -> None:
    db_url, bill = stored
    with TestClient(create_app(Settings(db_url=db_url, admin_token=TOKEN))) as c:
        r = c.post(f"/v1/reconcile?format=focus&now={NOW}", content=bill.read_bytes(),
                   headers={**ADMIN, "Accept": "text/markdown"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    _assert_escaped(r.text)
    assert "Largest unmatched charges" in r.text


def test_reconcile_markdown_from_the_cli_escapes_the_same(stored: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from service.cli import app
    from service.settings import get_settings

    db_url, bill = stored
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    get_settings.cache_clear()
    try:
        r = CliRunner().invoke(app, ["reconcile", str(bill), "--format", "focus", "--markdown", "--now", NOW])
    finally:
        get_settings.cache_clear()
    assert r.exit_code == 0, r.output
    _assert_escaped(r.stdout)


def _option(**changes: object):  # type: ignore[no-untyped-def]
    from optimizer.results import Option

    base = dict(kind="cloud", provider="vast", region=", CN, AS", instance_type="1x RTX4090", gpu="RTX4090",
                gpus_per_node=1, nodes=1, pricing="spot", hourly_usd=0.4, hours=10.0, cost_usd=4.0,
                memory_need_gb_per_gpu=10.0, vram_gb_per_gpu=24.0, sharding="none", quota="unknown",
                spot_risk={"interruptions_per_hour": 0.0125, "source": "prior: worst AWS bucket",
                           "expected_cost_usd": 4.2, "p90_cost_usd": 4.8, "expected_hours": 10.5,
                           "p90_hours": 12.0, "p_meets_deadline": 0.9})
    return Option.model_validate({**base, **changes})


def test_risk_and_commitment_tables_label_regions_without_empty_parts() -> None:
    from optimizer.commitments import CommitmentOption
    from service.render.commitments import commitment_rows
    from service.render.risk import risk_rows

    (row,) = risk_rows([_option()])
    assert row[0] == "vast/CN, AS `1x RTX4090`", row
    assert row[2] == "unknown" and row[3].startswith("0.0125/h (prior)")
    fields = set(CommitmentOption.model_fields)
    term = {"kind": "reserved", "term_months": 12, "payment": "no_upfront", "upfront_usd": 0.0,
            "hourly_usd": 0.3, "effective_hourly_usd": 0.3, "option_hourly_usd": 0.4, "source": "test", "as_of": datetime(2026, 11, 1, tzinfo=UTC),
            "saving_vs_on_demand": 0.25, "breakeven_utilization": 0.75}
    commit = CommitmentOption.model_validate({k: v for k, v in term.items() if k in fields})
    rows = commitment_rows([_option(pricing="on_demand", spot_risk=None, commitments=[commit])])
    assert rows and rows[0][0] == "vast/CN, AS `1x RTX4090`", rows
