"""Quoted vs billed over HTTP: runs saved from quotes, bills in FOCUS, CUR 2.0 and GCP layouts
reconciled (per-run differences, totals to the cent, unmatched spend), learnt corrections on later
quotes, spend exports with FOCUS names, and bad bills refused whole."""

from __future__ import annotations

import io
from collections.abc import Iterator
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from tests.integration._pricestore import BACKENDS, backend_url
from service.settings import Settings
from tests.integration._bills import (
    NOW,
    STORAGE_USD,
    UNTAGGED_USD,
    RunUse,
    Scenario,
    cur2_bill,
    focus_bill,
    gcp_bill,
)

TOKEN = "reconcile-admin"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e8}
AWS_A10G = {"providers": ["aws"], "gpus": ["A10G"]}
AWS_L4 = {"providers": ["aws"], "gpus": ["L4"]}
GCP_L4 = {"providers": ["gcp"], "gpus": ["L4"]}
LONGER = 1.2  # every run ran 20 % longer than quoted


def cent(d: Decimal) -> float:
    return float(d.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


def make_client(tmp: Path) -> TestClient:
    return TestClient(create_app(Settings(db_url=f"sqlite:///{tmp / 'gpucost.sqlite'}", admin_token=TOKEN)))


def save_runs(c: TestClient, constraints: dict[str, object], team: str = "vision") -> dict[str, dict[str, object]]:
    """Three runs saved from quotes (``save_run``); the quote says to tag the instance."""
    out = {}
    for i in (1, 2, 3):
        rid = f"{team}-r{i}"
        r = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": constraints,
                                      "save_run": {"run_id": rid, "team": team, "job": "finetune"}})
        assert r.status_code == 200, r.text
        q = r.json()
        assert q["saved_run"]["tag"] == {"gpucost-run-id": rid} and "gpucost-run-id" in q["saved_run"]["note"]
        out[rid] = q["best"]
    return out


def scenario(best: dict[str, dict[str, object]]) -> Scenario:
    uses = []
    for i, (rid, opt) in enumerate(best.items()):
        hours = float(opt["hours"]) * LONGER * int(opt["nodes"])  # type: ignore[arg-type]
        uses.append(RunUse(run_id=rid, hourly_usd=float(opt["hourly_usd"]), instance_hours=round(hours, 6),  # type: ignore[arg-type]
                           resource_id=f"i-0{rid}", covered=i == 2, gpus_per_node=float(opt["gpus_per_node"])))  # type: ignore[arg-type]
    return Scenario(uses)


LAYOUTS = {
    "focus": (focus_bill, AWS_A10G),
    "cur2": (cur2_bill, AWS_A10G),
    "gcp-billing": (gcp_bill, GCP_L4),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_bill_reconciles_per_run_with_totals_to_the_cent(tmp_path: Path, layout: str) -> None:
    build, constraints = LAYOUTS[layout]
    with make_client(tmp_path) as c:
        best = save_runs(c, constraints)
        s = scenario(best)
        data, billed_sum, effective_sum = build(s)  # type: ignore[operator]
        r = c.post(f"/v1/reconcile?format={layout}&now={NOW}", content=data, headers=ADMIN)
        assert r.status_code == 200, r.text
        doc = r.json()
        # Totals are the file's own sums, to the cent; the untagged line is reported, not dropped.
        assert doc["billed_total_usd"] == cent(billed_sum)
        assert doc["effective_total_usd"] == cent(effective_sum)
        assert doc["unmatched_usd"] == cent(Decimal(str(UNTAGGED_USD)))
        assert doc["unmatched_lines"] == 1 and doc["unmatched_top"][0]["billed_usd"] == cent(Decimal(str(UNTAGGED_USD)))
        assert doc["provisional_usd"] == 0
        runs = {b["run_id"]: b for b in doc["runs"]}
        assert set(runs) == set(best)
        assert abs(sum(b["billed_usd"] for b in runs.values()) + doc["unmatched_usd"] - doc["billed_total_usd"]) < 0.02
        want_billed = s.expected_billed("gcp" if layout == "gcp-billing" else "aws")
        want_eff = s.expected_effective()
        first, second, covered = list(best)
        for rid, opt in best.items():
            b = runs[rid]
            assert b["billed_usd"] == cent(want_billed[rid]) and b["effective_usd"] == cent(want_eff[rid])
            assert b["quoted_hours"] == pytest.approx(opt["hours"], abs=1e-4)
            assert b["billed_hours"] == pytest.approx(float(opt["hours"]) * LONGER, rel=1e-4)  # type: ignore[arg-type]
            # Ran 20 % longer at the quoted rate: the hours part is 0.2 x quoted hours x rate.
            assert b["differences"]["hours_usd"] == pytest.approx(
                0.2 * float(opt["hours"]) * float(opt["hourly_usd"]), abs=1e-3)  # type: ignore[arg-type]
            d = b["differences"]
            assert sum(d.values()) == pytest.approx(b["effective_usd"] - b["quoted_usd"], abs=0.01)
        assert runs[first]["differences"]["storage_usd"] > STORAGE_USD - 0.1
        assert runs[first]["cause"] == "storage left running"
        assert runs[second]["cause"] == "ran longer"
        assert runs[second]["differences"]["rate_usd"] == pytest.approx(0, abs=1e-3)
        # Covered by a Savings Plan / committed use at 70 % of the rate: a cheaper rate outweighs 20 % longer.
        assert runs[covered]["cause"] == "cheaper rate"
        assert runs[covered]["differences"]["rate_usd"] < 0
        (cal,) = doc["calibration"]
        assert cal["runs"] == sorted(best) and cal["gpu"] == next(iter(best.values()))["gpu"]
        # 1 + n/(n+2) (mean - 1): hours ratios 1.2, 1.2, 1.2 -> 1.12; rates 1, 1, 0.7 -> 0.94.
        assert cal["hours_factor"] == pytest.approx(1.12, abs=2e-4)
        assert cal["rate_factor"] == pytest.approx(0.94, abs=2e-4)
        # The same file again is recognised: nothing is stored twice.
        again = c.post(f"/v1/reconcile?now={NOW}", content=data, headers=ADMIN).json()
        assert again["already_imported"] is True and again["billed_total_usd"] == doc["billed_total_usd"]
        spend = c.get("/v1/spend?by=run").json()["rows"]
        assert cent(sum((Decimal(str(row["BilledCost"])) for row in spend), Decimal(0))) == cent(billed_sum)


@pytest.fixture(scope="module")
def reconciled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, dict[str, object]], dict[str, object], dict[str, object]]]:
    """A store whose A10G runs on AWS were reconciled; the A10G and L4 quotes taken before."""
    with make_client(tmp_path_factory.mktemp("reconciled")) as c:
        before_a10g = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": AWS_A10G}).json()["best"]
        before_l4 = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": AWS_L4}).json()["best"]
        best = save_runs(c, AWS_A10G)
        data, _, _ = focus_bill(scenario(best))
        assert c.post(f"/v1/reconcile?now={NOW}", content=data, headers=ADMIN).status_code == 200
        yield c, best, before_a10g, before_l4


def test_next_quote_applies_the_learnt_factors_for_that_gpu_only(reconciled) -> None:  # type: ignore[no-untyped-def]
    c, best, before, before_l4 = reconciled
    after = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": AWS_A10G}).json()["best"]
    assert after["instance_type"] == before["instance_type"]
    assert after["calibration"]["runs"] == sorted(best)
    assert after["calibration"]["hours_factor"] == pytest.approx(1.12, abs=2e-4)
    (learnt,) = c.get("/v1/calibration").json()["calibration"]
    assert (learnt["provider"], learnt["gpu"], learnt["runs"]) == ("aws", "A10G", sorted(best))
    assert after["hours"] == pytest.approx(before["hours"] * 1.12, rel=1e-3)
    assert after["cost_usd"] == pytest.approx(before["cost_usd"] * 1.12 * 0.94, rel=1e-3)
    md = c.post("/v1/quote?format=markdown", json={"workload": WORKLOAD, "constraints": AWS_A10G}).text
    assert "Corrected from reconciled bills: hours x1.12" in md and ", ".join(sorted(best)) in md
    # Turned off per request: the model's own figures.
    off = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": AWS_A10G, "use_calibration": False}).json()["best"]
    assert off["calibration"] is None and off["hours"] == before["hours"] and off["cost_usd"] == before["cost_usd"]
    # Another GPU is unchanged.
    l4 = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": AWS_L4}).json()["best"]
    assert l4["calibration"] is None and l4["hours"] == before_l4["hours"] and l4["cost_usd"] == before_l4["cost_usd"]


def test_runs_list_and_add_from_an_option(reconciled) -> None:  # type: ignore[no-untyped-def]
    c, best, _, _ = reconciled
    runs = c.get("/v1/runs").json()["runs"]
    assert [r["run_id"] for r in runs] == sorted(best)
    r0 = runs[0]
    assert {"run_id", "team", "job", "option", "quoted_usd", "quoted_hours", "snapshot_id", "created_at"} <= set(r0)
    made = c.post("/v1/runs", json={"run_id": "nlp-1", "team": "nlp", "option": r0["option"], "quoted_usd": 10,
                                    "quoted_hours": 2})
    assert made.status_code == 201, made.text
    assert c.get("/v1/runs?team=nlp").json()["runs"][0]["run_id"] == "nlp-1"
    dup = c.post("/v1/runs", json={"run_id": "nlp-1", "option": r0["option"]})
    assert dup.status_code == 422 and dup.json()["detail"][0]["loc"][-1] == "run_id"
    both = c.post("/v1/runs", json={"run_id": "x-1"})
    assert both.status_code == 422


def test_spend_exports_with_focus_names(reconciled) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    c, best, _, _ = reconciled
    text = c.get("/v1/spend?by=team&format=csv")
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/csv")
    frame = pd.read_csv(io.StringIO(text.text))
    for col in ("BilledCost", "EffectiveCost", "ChargePeriodStart", "ChargePeriodEnd", "ServiceProviderName",
                "ResourceId", "Tags", "x_PlannedCost"):
        assert col in frame.columns
    teams = frame.set_index("x_Team")
    assert teams.loc["(unmatched)", "BilledCost"] == pytest.approx(UNTAGGED_USD)
    planned = sum(float(o["cost_usd"]) for o in best.values())  # type: ignore[arg-type]
    assert teams.loc["vision", "x_PlannedCost"] == pytest.approx(planned, abs=0.02)
    parquet = c.get("/v1/spend?by=month&format=parquet")
    months = pd.read_parquet(io.BytesIO(parquet.content))
    assert "2026-11" in set(months["x_Month"]) and months["BilledCost"].sum() == pytest.approx(frame["BilledCost"].sum())
    # Per team and month (the page's quoted-vs-billed view): planned where planned, billed where billed.
    cells = {(r["x_Team"], r["x_Month"]): r for r in c.get("/v1/spend?by=team-month").json()["rows"]}
    # Every line of the bill is in November 2026; planned spend counts in the month each run was saved.
    assert cells[("vision", "2026-11")]["BilledCost"] == pytest.approx(teams.loc["vision", "BilledCost"])
    assert sum(r["x_PlannedCost"] for (t, _), r in cells.items() if t == "vision") == pytest.approx(planned, abs=0.02)


def _counts(c: TestClient) -> tuple[int, float]:
    rows = c.get("/v1/spend?by=run").json()["rows"]
    return sum(r["x_Lines"] for r in rows), sum(r["BilledCost"] for r in rows)


@pytest.mark.parametrize(
    ("change", "column"),
    [
        ("drop EffectiveCost", "EffectiveCost"),
        ("currency", "BillingCurrency"),
        ("negative", "ConsumedQuantity"),
        ("money", "BilledCost"),
        ("tags", "Tags"),
    ],
)
def test_bad_bills_are_422_naming_the_column_and_store_nothing(reconciled, change: str, column: str) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    c, best, _, _ = reconciled
    before = _counts(c)
    data, _, _ = focus_bill(scenario(best))
    frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    if change == "drop EffectiveCost":
        frame = frame.drop(columns=["EffectiveCost"])
    elif change == "currency":
        frame.loc[len(frame) - 1, "BillingCurrency"] = "EUR"  # the last line: all before it would parse
    elif change == "negative":
        frame.loc[len(frame) - 1, "ConsumedQuantity"] = "-3"
    elif change == "money":
        frame.loc[len(frame) - 1, "BilledCost"] = "twelve"
    else:
        frame.loc[len(frame) - 1, "Tags"] = "{not json"
    r = c.post("/v1/reconcile?format=focus", content=frame.to_csv(index=False).encode(), headers=ADMIN)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"][-1] == column, detail
    assert _counts(c) == before


def test_reconcile_is_admin_only_and_bounded(reconciled) -> None:  # type: ignore[no-untyped-def]
    c, _, _, _ = reconciled
    assert c.post("/v1/reconcile", content=b"BilledCost\n1\n").status_code == 401
    assert c.post("/v1/reconcile", content=b"BilledCost\n1\n", headers={"Authorization": "Bearer nope"}).status_code == 403
    assert c.post("/v1/reconcile", content=b"x" * 1_100_000, headers=ADMIN).status_code == 413
    assert c.post("/v1/reconcile", content=b"", headers=ADMIN).status_code == 422
    mixed = c.post("/v1/reconcile?rate=EUR:abc", content=b"BilledCost\n1\n", headers=ADMIN)
    assert mixed.status_code == 422 and mixed.json()["detail"][0]["loc"][-1] == "rate"


def test_reconcile_markdown(reconciled) -> None:  # type: ignore[no-untyped-def]
    c, best, _, _ = reconciled
    data, _, _ = focus_bill(scenario(best))
    r = c.post(f"/v1/reconcile?now={NOW}", content=data, headers={**ADMIN, "Accept": "text/markdown"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    assert "## Quoted vs billed" in r.text and "storage left running" in r.text


@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_bills_and_calibration_on_each_store_backend(request: pytest.FixtureRequest, tmp_path: Path,
                                                         backend: str) -> None:
    with backend_url(request, tmp_path, backend) as url, \
            TestClient(create_app(Settings(db_url=url, admin_token=TOKEN))) as c:
        best = save_runs(c, AWS_A10G)
        data, billed, _ = focus_bill(scenario(best))
        doc = c.post(f"/v1/reconcile?now={NOW}", content=data, headers=ADMIN).json()
        assert doc["billed_total_usd"] == cent(billed) and doc["calibration"][0]["runs"] == sorted(best)
        assert c.post(f"/v1/reconcile?now={NOW}", content=data, headers=ADMIN).json()["already_imported"]
        after = c.post("/v1/quote", json={"workload": WORKLOAD, "constraints": AWS_A10G}).json()["best"]
        assert after["calibration"]["runs"] == sorted(best)
        rows = c.get("/v1/spend?by=run").json()["rows"]
        assert sum(r["x_Lines"] for r in rows) == data.count(b"\n") - 1


def test_a_failure_while_storing_leaves_nothing_half_stored(reconciled, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from optimizer.errors import StoreError
    from pricing.store import runs as run_store

    c, best, _, _ = reconciled
    before = _counts(c)
    s = scenario(best)
    s.runs[1].instance_hours += 1.0  # another bill (not the one already imported)
    data, _, _ = focus_bill(s)

    def broken(*_: object) -> None:
        raise StoreError("disk full while relearning")  # after the import and its lines were inserted

    monkeypatch.setattr(run_store, "_relearn", broken)
    r = c.post(f"/v1/reconcile?now={NOW}", content=data, headers=ADMIN)
    assert r.status_code == 503 and "disk full" in r.text
    assert _counts(c) == before
    monkeypatch.undo()
    ok = c.post(f"/v1/reconcile?now={NOW}", content=data, headers=ADMIN).json()
    assert ok["already_imported"] is False and _counts(c)[0] == before[0] + ok["lines"]
