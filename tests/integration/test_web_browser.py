"""The web page in a real headless Chromium (Debian's chromium + chromium-driver via selenium):
a shared link opens on a priced quote with its chart; filling the form and submitting requotes
and rewrites the link; a plan for a team's jobs is solved and drawn.

Skipped, saying why, only where Chromium is not installed and CI is not set; in CI
(``.ci/run`` installs it through ``infra/browser-ci.sh``) its absence is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.integration._live_server import running_server

SHARED_LINK = ("/?model=llama-3-8b&method=qlora&tokens=100000000&micro_batch_size=2&seq_len=2048"
               "&gradient_checkpointing=true")
# What chromium needs to run headless as root in a container without reaching out anywhere.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1440,900")


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    reason = "chromium and chromium-driver are not installed (bash infra/browser-ci.sh installs them)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; .ci/run must install them")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _chromium()
    tmp = tmp_path_factory.mktemp("web")
    with running_server(f"sqlite:///{tmp / 'gpucost.sqlite'}", tmp / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium import webdriver  # a dev dependency: its absence is an install error, not a skip
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, timeout: float = 180):  # type: ignore[no-untyped-def]
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def _computed(driver) -> int:  # type: ignore[no-untyped-def]
    return int(driver.execute_script("return Number(document.body.dataset.computed || 0)"))


def _quote_rows(driver) -> list[list[str]]:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, "#quote-table tbody tr")]


def test_shared_link_opens_on_a_priced_quote(browser, base_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    browser.get(base_url + SHARED_LINK)
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    browser.save_screenshot(str(tmp_path / "shared-link.png"))
    assert browser.find_element(By.ID, "error").text == ""
    # The form shows the link's question ...
    assert browser.find_element(By.ID, "model").get_attribute("value") == "llama-3-8b"
    assert browser.find_element(By.ID, "method").get_attribute("value") == "qlora"
    assert browser.find_element(By.ID, "gradient_checkpointing").get_attribute("value") == "true"
    # ... and the answer: a ranked, priced table, cheapest first.
    rows = _quote_rows(browser)
    assert len(rows) >= 3, rows
    costs = [float(r[3].lstrip("$").replace(",", "")) for r in rows]
    assert all(c > 0 for c in costs)
    assert costs[0] == min(costs)  # the chosen one is the cheapest
    assert "chosen" in browser.find_element(By.CSS_SELECTOR, "#quote-table tbody tr").get_attribute("textContent")
    assert all(r[8] not in ("", "-") for r in rows), "every option shows its recipe"
    # The break-even chart is drawn (an SVG with the renderer's plotted paths).
    chart = browser.find_element(By.CSS_SELECTOR, "#breakeven-chart svg")
    assert len(chart.find_elements(By.TAG_NAME, "path")) > 5
    assert "break" in browser.find_element(By.ID, "breakeven-summary").text
    markdown = browser.find_element(By.ID, "markdown-text").get_attribute("value")
    assert markdown.startswith("## GPU quote") and "| # | where |" in markdown and "## Rent or buy" in markdown


def test_filling_the_form_requotes_and_rewrites_the_link(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    browser.get(base_url + "/")
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    assert _quote_rows(browser) == []  # nothing asked, nothing computed
    model = browser.find_element(By.ID, "model")
    model.send_keys("qwen2.5-1.5b")
    Select(browser.find_element(By.ID, "method")).select_by_value("lora")
    browser.find_element(By.ID, "tokens").send_keys("5e7")
    browser.find_element(By.ID, "deadline_hours").send_keys("24")
    before = _computed(browser)
    # Keyboard submission: Enter in a field submits the form.
    browser.find_element(By.ID, "tokens").send_keys(Keys.ENTER)
    _wait(browser, lambda d: _computed(d) > before)
    assert browser.find_element(By.ID, "error").text == ""
    rows = _quote_rows(browser)
    assert len(rows) >= 3
    assert all(float(r[4].rstrip(" h").replace(",", "")) <= 24 for r in rows)  # the deadline holds
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["model"] == ["qwen2.5-1.5b"] and query["method"] == ["lora"]
    assert query["tokens"] == ["5e7"] and query["deadline_hours"] == ["24"]
    # The rewritten link reopens the same quote.
    link = browser.current_url
    browser.get(link)
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    assert _quote_rows(browser) == rows


def test_plan_for_a_team_is_solved_and_charted(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    browser.get(base_url + SHARED_LINK + "&runs_per_month=4")
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    browser.find_element(By.ID, "job_name").send_keys("weekly-qlora")
    browser.find_element(By.ID, "add-job").click()
    assert "weekly-qlora" in browser.find_element(By.ID, "jobs-table").text
    assert "jobs" in parse_qs(urlsplit(browser.current_url).query)
    browser.find_element(By.ID, "horizon_months").send_keys("6")
    browser.find_element(By.ID, "compute-plan").click()
    _wait(browser, lambda d: d.find_element(By.ID, "plan-result").is_displayed()
          or d.find_element(By.ID, "error").text)
    assert browser.find_element(By.ID, "error").text == ""
    assert "Optimal" in browser.find_element(By.ID, "plan-summary").text
    assert browser.find_elements(By.CSS_SELECTOR, "#plan-chart svg")
    assert "## Portfolio plan" in browser.find_element(By.ID, "markdown-text").get_attribute("value")
