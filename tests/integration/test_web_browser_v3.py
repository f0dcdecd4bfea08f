"""The page shows what the v3 answers carry, in a real headless Chromium (the fixtures of
``test_web_browser.py``), against a server whose store was filled through the API first:

- issue 21: which hours were measured: a ``measured``/``scaled`` mark in the hours cell with the
  measurement's id in its tooltip, and the estimate of the chosen option saying the same;
- issue 24: each cloud option's quota state (``short`` with the quota code, need and limit, from a
  ``GPUCOST_QUOTAS`` file) and each spot option's reclaim rate, expected and p90 cost and hours;
- issue 25: the "quoted vs billed" view per team and month (``GET /v1/spend?by=team-month``), the
  saved runs with what their bill lines came to, and the learnt corrections, after runs were saved
  (``POST /v1/runs``) and a FOCUS bill reconciled (``POST /v1/reconcile``, admin token); a team named
  ``<img src=x onerror=alert(1)>`` is shown as text.

All at the laptop's 1280 px and the phone's 390 px without widening the page, and without breaking
the page's Content-Security-Policy.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.integration._bills import NOW, RunUse, Scenario, focus_bill
from tests.integration._live_server import running_server
from tests.integration.test_web_browser import (  # noqa: F401  (fixtures)
    LAPTOP,
    PHONE,
    RECORD_POSTS,
    _chromium,
    _computed,
    _csp_violations,
    _open,
    _quote_rows,
    _rect,
    _wait,
    browser,
    viewport,
)

TOKEN = "web-v3-admin"
DATA = Path(__file__).resolve().parents[1] / "data"
MEASUREMENT = DATA / "probe" / "rtx4090_bert_base.json"
QUOTAS = DATA / "quotas" / "p_family_96.yaml"
EVIL = "<img src=x onerror=alert(1)>"
RISK_COLUMN = 10  # Quota / spot risk, after the price's date
HOURS_COLUMN = 4


def _http(base: str, path: str, body: bytes | dict[str, Any] | None = None, admin: bool = False) -> Any:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json" if not isinstance(body, bytes) else "text/csv"}
    if admin:
        headers["Authorization"] = f"Bearer {TOKEN}"
    req = urllib.request.Request(base + path, data=data, headers=headers, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=180) as resp:
        return json.loads(resp.read())


def _money(text: str) -> float:
    return float(text.replace("$", "").replace(",", "").replace("−", "-").replace("+", "").split(" ")[0])


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A server with a quota file and an admin token; a measurement, three saved runs (two teams,
    one named as HTML) and their reconciled FOCUS bill stored through its API."""
    _chromium()
    tmp = tmp_path_factory.mktemp("web-v3")
    with running_server(f"sqlite:///{tmp / 'gpucost.sqlite'}", tmp / "server.log",
                        env={"GPUCOST_ADMIN_TOKEN": TOKEN, "GPUCOST_QUOTAS": str(QUOTAS)}) as url:
        measurement = _http(url, "/v1/measurements", json.loads(MEASUREMENT.read_text(encoding="utf-8")), admin=True)
        q = _http(url, "/v1/quote", {"workload": {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e8},
                                     "constraints": {"providers": ["aws"], "gpus": ["A10G"]}})
        best = q["best"]
        uses = []
        for rid, team, longer in (("vision-r1", "vision", 1.2), ("vision-r2", "vision", 1.2), ("evil-r1", EVIL, 1.0)):
            _http(url, "/v1/runs", {"run_id": rid, "team": team, "job": "finetune", "option": best,
                                    "quoted_usd": best["cost_usd"], "quoted_hours": best["hours"],
                                    "created_at": "2026-11-09T00:00:00Z"})
            uses.append(RunUse(run_id=rid, hourly_usd=float(best["hourly_usd"]),
                               instance_hours=round(float(best["hours"]) * longer * int(best["nodes"]), 6),
                               resource_id=f"i-0{rid}"))
        data, _, _ = focus_bill(Scenario(uses))
        reconciled = _http(url, f"/v1/reconcile?format=focus&now={NOW}", data, admin=True)
        assert {b["run_id"] for b in reconciled["runs"]} == {"vision-r1", "vision-r2", "evil-r1"}
        yield {"url": url, "measurement_id": measurement["id"], "best": best}


def _posted_quote(driver, base: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The quote the page posted, asked again of the API as JSON: what each row must show."""
    bodies = [body for u, body in driver.execute_script("return window.__posted") if u == "/v1/quote"]
    assert bodies
    return _http(base, "/v1/quote", json.loads(bodies[0]))  # type: ignore[no-any-return]


def _requote(driver) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    driver.execute_script(RECORD_POSTS)
    before = _computed(driver)
    driver.find_element(By.ID, "compute").click()
    _wait(driver, lambda d: _computed(d) > before)
    assert driver.find_element(By.ID, "error").text == ""


def test_measured_hours_are_marked_with_their_measurement(browser, ledger, viewport, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    viewport(LAPTOP)
    w = json.loads(MEASUREMENT.read_text(encoding="utf-8"))["workload"]
    query = {**{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in w.items()},
             "gpus": "RTX4090,A100-80GB,L40S", "max_gpus": "1"}
    _open(browser, ledger["url"] + "/?" + urlencode(query))
    _requote(browser)
    browser.save_screenshot(str(tmp_path / "measured.png"))
    q = _posted_quote(browser, ledger["url"])
    rows = browser.find_elements(By.CSS_SELECTOR, "#quote-table tbody tr")
    assert len(rows) == len(q["options"]) >= 3
    mid = ledger["measurement_id"]
    kinds = set()
    for tr, o in zip(rows, q["options"], strict=True):
        hours = tr.find_elements(By.TAG_NAME, "td")[HOURS_COLUMN]
        marks = hours.find_elements(By.CSS_SELECTOR, ".badge")
        if o["basis"] == "model":
            assert marks == [], o
            continue
        (mark,) = marks
        kinds.add(o["basis"])
        assert mark.text == o["basis"] and o["measurement_id"] == mid
        assert mid in mark.get_attribute("title")
        assert ("on another GPU" in mark.get_attribute("title")) == (o["basis"] == "scaled")
        assert o["basis"] == ("measured" if o["gpu"] == "RTX4090" else "scaled"), o
        # The hours figure stays readable beside the mark.
        assert re.match(r"[\d,.]+ h ", hours.text), hours.text
    assert kinds == {"measured", "scaled"}, kinds
    # The estimate view of the chosen option says the same, with the id.
    est = browser.find_element(By.ID, "estimate-summary")
    assert est.is_displayed()
    want = "measured" if q["best"]["gpu"] == "RTX4090" else "scaled"
    assert est.get_attribute("data-basis") == want and mid in est.text, est.text
    assert est.find_element(By.CSS_SELECTOR, ".badge").text == want
    # It is the estimate of the chosen option's own recipe: the same hours per run.
    m = re.search(r"Estimate of the chosen recipe on (\d+)x (\S+): ([\d.,]+) h per run", est.text)
    assert m and m.group(2) == q["best"]["gpu"], est.text
    assert float(m.group(3).replace(",", "")) == pytest.approx(q["best"]["hours"], abs=0.006)
    assert mid in browser.find_element(By.ID, "quote-summary").text
    assert _csp_violations(browser) == []


def test_spot_risk_and_quota_state_next_to_each_option(browser, ledger, viewport, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    viewport(LAPTOP)
    _open(browser, ledger["url"] + "/?model=llama-3-8b&method=qlora&tokens=100000000&deadline_hours=24"
          "&allow_spot=true&providers=aws,gcp")
    _requote(browser)
    q = _posted_quote(browser, ledger["url"])
    rows = _quote_rows(browser)
    assert len(rows) == len(q["options"])
    spot_seen = 0
    for r, o in zip(rows, q["options"], strict=True):
        risk = r[RISK_COLUMN]
        if o["kind"] != "cloud":
            assert risk == "-"
            continue
        assert risk.startswith(f"quota {o['quota']}"), (risk, o["quota"])
        if o["quota_detail"] and o["quota_detail"].get("code"):
            assert o["quota_detail"]["code"] in risk
        if o["spot_risk"]:
            spot_seen += 1
            s = o["spot_risk"]
            assert f"{s['interruptions_per_hour']:.4f} reclaims/h" in risk, risk
            assert f"${s['expected_cost_usd']:,.2f} expected, ${s['p90_cost_usd']:,.2f} p90" in risk, risk
            assert "meets the deadline" in risk
        else:
            assert "reclaims" not in risk
    assert spot_seen, "the headline job with spot allowed shows spot options"
    browser.execute_script("document.querySelector('#quote-table td.risk').scrollIntoView({block: 'center', inline: 'end'})")
    browser.save_screenshot(str(tmp_path / "spot-risk.png"))

    # A deadline one p4d.24xlarge cannot keep: two are needed, 192 vCPUs against the file's 96.
    big = {"workload": {"model": "llama-3-8b", "method": "full", "tokens": 2e9},
           "constraints": {"providers": ["aws", "gcp"], "regions": ["us-east-1", "us-central1"], "gpus": ["A100"],
                           "include_local": False}}
    one = _http(ledger["url"], "/v1/quote", big)
    one_p4d = min(o["hours"] for o in [one["best"], *one["options"]]
                  if o and o["instance_type"] == "p4d.24xlarge" and o["nodes"] == 1)
    _open(browser, ledger["url"] + "/?model=llama-3-8b&method=full&tokens=2000000000&providers=aws,gcp"
          f"&regions=us-east-1,us-central1&gpus=A100&include_local=false&deadline_hours={0.95 * one_p4d:.1f}")
    browser.save_screenshot(str(tmp_path / "quota-short.png"))
    short = browser.find_elements(By.CSS_SELECTOR, "#quote-table td.risk .badge.quota-short")
    assert short, _quote_rows(browser)
    assert "quota short (L-417A185B: need 192 / limit 96 vCPUs)" in short[0].text
    assert short[0].get_attribute("title") == "the L-417A185B quota of aws us-east-1"
    unknown = browser.find_elements(By.CSS_SELECTOR, "#quote-table td.risk .badge.quota-unknown")
    assert unknown and all(u.text.startswith("quota unknown") for u in unknown)
    assert _csp_violations(browser) == []


def _spend_rows(driver, table: str) -> list[list[str]]:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    return [[td.get_attribute("textContent") for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


def _load_spend(driver) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    before = int(driver.execute_script("return Number(document.body.dataset.spendLoaded || 0)"))
    driver.find_element(By.ID, "load-spend").click()
    _wait(driver, lambda d: int(d.execute_script("return Number(document.body.dataset.spendLoaded || 0)")) > before)
    assert driver.find_element(By.ID, "error").text == ""


def test_quoted_vs_billed_per_team_and_month(browser, ledger, viewport, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    viewport(LAPTOP)
    _open(browser, ledger["url"] + "/")
    _load_spend(browser)
    browser.find_element(By.ID, "spend").location_once_scrolled_into_view
    browser.save_screenshot(str(tmp_path / "spend-laptop.png"))
    api = _http(ledger["url"], "/v1/spend?by=team-month")["rows"]
    rows = _spend_rows(browser, "spend-table")
    assert len(rows) == len(api) >= 2
    for r, a in zip(rows, api, strict=True):
        assert r[0] == a["x_Team"] and r[1] == a["x_Month"]
        assert _money(r[2]) == pytest.approx(a["x_PlannedCost"], abs=0.006)
        assert _money(r[3]) == pytest.approx(a["BilledCost"], abs=0.006)
        assert _money(r[4]) == pytest.approx(a["EffectiveCost"], abs=0.006)
        assert _money(r[5]) == pytest.approx(a["EffectiveCost"] - a["x_PlannedCost"], abs=0.011)
    by_team = {r[0]: r for r in rows}
    # The vision runs ran 20 % longer than quoted: billed above the quote, said with a sign.
    assert by_team["vision"][1] == "2026-11" and by_team["vision"][5].startswith("+$")
    # The HTML team name is text in a cell, never an element.
    assert EVIL in by_team and browser.execute_script("return document.querySelectorAll('#spend img').length") == 0
    assert "(unmatched)" in by_team  # the bill's untagged line is billed spend no run claims
    runs = {r[0]: r for r in _spend_rows(browser, "runs-table")}
    assert set(runs) == {"vision-r1", "vision-r2", "evil-r1"}
    assert runs["vision-r1"][1] == "vision" and "aws/" in runs["vision-r1"][3]
    assert _money(runs["vision-r2"][5]) > _money(runs["vision-r2"][4])  # billed above quoted
    cal = browser.find_element(By.ID, "calibration-list").text
    assert re.search(r"aws A10G: hours x1\.\d+, rate x[\d.]+ \(from evil-r1, vision-r1, vision-r2\)", cal), cal

    # One team at a time.
    Select(browser.find_element(By.ID, "spend-team")).select_by_value("vision")
    assert {r[0] for r in _spend_rows(browser, "spend-table")} == {"vision"}
    assert {r[0] for r in _spend_rows(browser, "runs-table")} == {"vision-r1", "vision-r2"}
    assert browser.find_element(By.ID, "spend-summary").text.startswith("Team vision: quoted $")
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert _csp_violations(browser) == []


def test_phone_width_keeps_the_v3_columns_and_views_in_their_boxes(browser, ledger, viewport, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    viewport(PHONE)
    _open(browser, ledger["url"] + "/?model=llama-3-8b&method=qlora&tokens=100000000&deadline_hours=24"
          "&allow_spot=true&providers=aws#spend")  # #spend opens the quoted-vs-billed view too
    assert browser.execute_script("return window.innerWidth") == PHONE[0]
    assert browser.find_element(By.ID, "spend-result").is_displayed()
    assert _spend_rows(browser, "spend-table")
    browser.save_screenshot(str(tmp_path / "phone-v3.png"))
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    for box, css in (("#quote .scroll", "#quote-table tbody tr:first-child td.risk"),
                     ("#spend .scroll", "#spend-table tbody tr:first-child td:last-child")):
        browser.execute_script("document.querySelector(arguments[0]).scrollIntoView({block: 'nearest', inline: 'nearest'})", css)
        outer, cell = _rect(browser, box), _rect(browser, css)
        assert cell["width"] > 0 and outer["left"] - 1 <= cell["left"] and cell["right"] <= outer["right"] + 1, (css, cell, outer)
        browser.execute_script("document.querySelector(arguments[0]).scrollLeft = 0", box)
    assert _csp_violations(browser) == []
