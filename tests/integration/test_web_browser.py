"""The web page in a real headless Chromium (Debian's chromium + chromium-driver via selenium), at a
laptop's 1280 px and a phone's 390 px: a shared link opens on a priced quote with its chart, its
warnings and each price's age; filling the form and submitting requotes and rewrites the link; a
plan for a team's jobs is solved and drawn; on a phone the form does not cover the answers and the
table scrolls; a link's invalid or unknown fields are named and never posted; the page breaks no
rule of its Content-Security-Policy.

``./scripts/test`` (the README's test command) installs Chromium through ``infra/browser-ci.sh``
and then requires it (``GPUCOST_REQUIRE_BROWSER``), as CI does; only a bare ``pytest`` without
Chromium skips these tests, saying why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.integration._live_server import running_server

SHARED_LINK = ("/?model=llama-3-8b&method=qlora&tokens=100000000&micro_batch_size=2&seq_len=2048"
               "&gradient_checkpointing=true")
# What chromium needs to run headless as root in a container without reaching out anywhere.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,900")
LAPTOP = (1280, 900)
PHONE = (390, 844)


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    reason = "chromium and chromium-driver are not installed (bash infra/browser-ci.sh installs them)"
    if os.environ.get("CI") or os.environ.get("GPUCOST_REQUIRE_BROWSER"):
        # ./scripts/test installed them (or stopped saying how): here their absence is a failure.
        pytest.fail(f"{reason}; ./scripts/test and .ci/run install them")
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
    # The console log shows Content-Security-Policy violations.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def viewport(browser) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """Sets the page's viewport (CSS px) exactly, as a phone's or a laptop's, whatever the window
    manager allows; resets it after the test."""
    def set_size(size: tuple[int, int]) -> None:
        width, height = size
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    yield set_size
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def _csp_violations(driver) -> list[str]:  # type: ignore[no-untyped-def]
    return [e["message"] for e in driver.get_log("browser")
            if "Content Security Policy" in e["message"] or "Refused to" in e["message"]]


def _open(driver, url: str) -> None:  # type: ignore[no-untyped-def]
    driver.get(url)
    _wait(driver, lambda d: d.execute_script("return document.body.dataset.ready") == "true")


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


def _rect(driver, css: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height};", css)


def _answer_is_honest(driver) -> None:  # type: ignore[no-untyped-def]
    """What both widths must show with the answer: the quote's warnings, each price's date and age,
    the break-even in the CLI's words, and the recipe reachable (scrolled to, never cut)."""
    from selenium.webdriver.common.by import By

    warnings = driver.find_element(By.ID, "quote-warnings")
    assert warnings.is_displayed()
    assert "stale prices" in warnings.text and "months old" in warnings.text, warnings.text
    rows = _quote_rows(driver)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d, (today|\d+ days? old|\d+ months old)", r[9]) for r in rows), rows
    assert all(", ," not in r[1] and "/, " not in r[1] for r in rows), "region labels have no empty parts"
    assert all(r[6] in ("on-demand", "spot", "purchase") for r in rows), [r[6] for r in rows]
    summary = driver.find_element(By.ID, "breakeven-summary").text
    assert re.search(r"break-even: (after \d+ runs = [\d.]+ months|past its \d+-month life|never)", summary), summary
    # Not "17736 runs (2216.9 months)": a break-even past the build's life is said to be so.
    assert not re.search(r"\d+ runs \([\d.]+ months", summary), summary
    # The table scrolls inside its box: the page itself is no wider than the viewport, and the
    # Recipe column (and the price date after it) can be scrolled into view, whole.
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    box = "#quote .scroll"
    for css in ("#quote-table tbody tr:first-child td.recipe", "#quote-table tbody tr:first-child td.age"):
        # Scrolled sideways inside its box (as a user swipes), the cell shows whole.
        driver.execute_script("document.querySelector(arguments[0]).scrollIntoView({block: 'nearest', inline: 'nearest'})", css)
        outer, cell = _rect(driver, box), _rect(driver, css)
        assert cell["width"] > 0 and outer["left"] - 1 <= cell["left"] and cell["right"] <= outer["right"] + 1, (css, cell, outer)
    driver.execute_script("document.querySelector(arguments[0]).scrollLeft = 0", box)


def test_laptop_width_shows_warnings_ages_and_the_whole_table(browser, base_url: str, viewport, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    viewport(LAPTOP)
    _open(browser, base_url + SHARED_LINK)
    browser.save_screenshot(str(tmp_path / "laptop.png"))
    assert browser.execute_script("return window.innerWidth") == LAPTOP[0]
    # Two columns: the form beside the results, sticky while the results scroll.
    form, results = _rect(browser, "#job"), _rect(browser, "#results")
    assert form["right"] <= results["left"]
    assert browser.execute_script("return getComputedStyle(document.getElementById('job')).position") == "sticky"
    _answer_is_honest(browser)
    assert _csp_violations(browser) == []


# The page's fetch, recorded: what it posts, kept in the page before it reaches the network.
RECORD_POSTS = ("window.__posted = []; const real = window.fetch;"
                "window.fetch = (url, init) => { if (init && init.body) window.__posted.push([String(url), init.body]);"
                " return real(url, init); };")


def _replayed(driver, base_url: str, path: str) -> bytes:  # type: ignore[no-untyped-def]
    """Compute the page's question again, recording the bodies it posts, and send the first one
    posted to ``path`` to the API itself: the answer the page was given, for comparison."""
    import urllib.request

    from selenium.webdriver.common.by import By

    driver.execute_script(RECORD_POSTS)
    before = _computed(driver)
    driver.find_element(By.ID, "compute").click()
    _wait(driver, lambda d: _computed(d) > before)
    bodies = [body for url, body in driver.execute_script("return window.__posted") if url == path]
    assert bodies, path
    req = urllib.request.Request(base_url + path, data=bodies[0].encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.read()  # type: ignore[no-any-return]


def test_the_pages_break_even_is_worded_as_the_cli_words_it(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    """The page's break-even sentence holds the very phrase the CLI and the Markdown print
    (``service.render.labels.breakeven_phrase``) for the request the page posted."""
    from selenium.webdriver.common.by import By

    from optimizer.breakeven import BreakevenResult
    from service.render.labels import breakeven_phrase

    # A cadence whose break-even lies past the 4090 box's life (the README's cadence table).
    _open(browser, base_url + "/?model=llama-3-8b&method=qlora&tokens=100000000&rent_gpu=A100-80GB"
          "&buy_gpu=RTX4090&runs_per_month=4")
    result = BreakevenResult.model_validate_json(_replayed(browser, base_url, "/v1/breakeven"))
    phrase = breakeven_phrase(result)
    assert not result.within_lifetime and phrase.startswith("past its")
    assert f"break-even: {phrase}." in browser.find_element(By.ID, "breakeven-summary").text


def test_each_options_own_warnings_are_on_the_page(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    """A tight fit (or idle GPUs, or a slow host) is said next to the option, as in the CLI and the
    Markdown: every option warning of the quote the page posted is on the page, numbered by row,
    and the row's memory cell is marked."""
    from selenium.webdriver.common.by import By

    from optimizer.results import Quote

    _open(browser, base_url + "/?model=llama-3-8b&method=qlora&tokens=100000000")
    q = Quote.model_validate_json(_replayed(browser, base_url, "/v1/quote"))
    warned = [(i, w) for i, o in enumerate(q.options) for w in o.warnings]
    assert warned, "the headline quote has a tight fit among its options (the README's #9)"
    shown = browser.find_element(By.ID, "quote-warnings").text
    rows = browser.find_elements(By.CSS_SELECTOR, "#quote-table tbody tr")
    for i, w in warned:
        assert f"#{i + 1}: {w}" in shown, (i, w)
        assert "warned" in rows[i].find_elements(By.TAG_NAME, "td")[7].get_attribute("class")


def test_phone_width_puts_the_answer_below_the_form_uncovered(browser, base_url: str, viewport, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    viewport(PHONE)
    _open(browser, base_url + SHARED_LINK)
    browser.save_screenshot(str(tmp_path / "phone-top.png"))
    assert browser.execute_script("return window.innerWidth") == PHONE[0]
    # One column: the form is not sticky, and the results start below it.
    assert browser.execute_script("return getComputedStyle(document.getElementById('job')).position") != "sticky"
    assert _rect(browser, "#results")["top"] >= _rect(browser, "#job")["bottom"]
    # Scrolled to the answer, what is on screen there is the answer, not the form over it.
    first = browser.find_element(By.CSS_SELECTOR, "#quote-table tbody tr:first-child td:nth-child(2)")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", first)
    browser.save_screenshot(str(tmp_path / "phone-results.png"))
    on_top = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "const hit = document.elementFromPoint(r.left + 5, r.top + r.height / 2);"
        "return hit && arguments[0].contains(hit) ? 'row' : (hit ? hit.id || hit.tagName : 'nothing');", first)
    assert on_top == "row"
    warnings = browser.find_element(By.ID, "quote-warnings")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", warnings)
    assert browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "const hit = document.elementFromPoint(r.left + 20, r.top + 8); return !!hit && arguments[0].contains(hit);", warnings)
    # The table is wider than a phone: it scrolls in its own box.
    assert browser.execute_script("const b = document.querySelector('#quote .scroll'); return b.scrollWidth > b.clientWidth")
    _answer_is_honest(browser)
    assert _csp_violations(browser) == []


def test_a_links_invalid_fields_are_named_and_nothing_is_posted_as_given(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    _open(browser, base_url + "/?model=llama-3-8b&method=evil&tokens=abc&bogus=1")
    error = browser.find_element(By.ID, "error").text
    assert "method" in error and "tokens" in error, error
    assert "bogus" in browser.find_element(By.ID, "query-notes").text
    assert _computed(browser) == 0  # an invalid link is shown, named, and not computed
    assert browser.find_element(By.ID, "method").get_attribute("value") == ""  # not put in the form as given

    # A shared plan: the unknown fields are dropped, the job with an invalid field is left out.
    jobs = [
        {"name": "weekly", "workload": {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 1e7, "evil": 1},
         "runs_per_month": 4, "extra": "x"},
        {"name": "<img src=x onerror=alert(1)>", "workload": {"model": "gpt2", "method": "bogus"}},
    ]
    _open(browser, base_url + "/?jobs=" + quote(json.dumps(jobs)))
    error = browser.find_element(By.ID, "error").text
    assert "jobs[1].workload.method" in error, error
    notes = browser.find_element(By.ID, "query-notes").text
    assert "jobs[0].workload.evil" in notes and "jobs[0].extra" in notes, notes
    table = browser.find_element(By.ID, "jobs-table").text
    assert "weekly" in table and "onerror" not in table
    # What the page posts for the plan: recorded in the page before it reaches the network.
    browser.execute_script(RECORD_POSTS)
    browser.find_element(By.ID, "compute-plan").click()
    _wait(browser, lambda d: d.find_element(By.ID, "plan-result").is_displayed() or d.find_element(By.ID, "error").text)
    posted = browser.execute_script("return window.__posted")
    plans = [json.loads(body) for url, body in posted if url.startswith("/v1/plan")]
    assert plans, posted
    for plan in plans:
        assert [j["name"] for j in plan["jobs"]] == ["weekly"]
        assert "extra" not in plan["jobs"][0] and "evil" not in plan["jobs"][0]["workload"]
    assert browser.find_element(By.ID, "error").text == ""
    assert _csp_violations(browser) == []


def test_the_recipe_offers_the_apis_loss_layout_and_4bit_inputs(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    """``quantization``, ``cross_entropy`` and ``memory_format`` are filled from the API's schema, a
    link sets them, and what they say reaches the answer (a fused loss is priced faster)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, base_url + "/")
    offered = {name: [o.get_attribute("value") for o in Select(browser.find_element(By.ID, name)).options]
               for name in ("quantization", "cross_entropy", "memory_format")}
    assert offered == {"quantization": ["", "nf4", "gptq"], "cross_entropy": ["", "auto", "eager", "fused"],
                       "memory_format": ["", "channels_last", "nchw"]}
    cheapest: dict[str, float] = {}
    for kernel in ("eager", "fused"):
        before = _computed(browser)
        _open(browser, base_url + f"/?model=gpt2&tokens=1e9&cross_entropy={kernel}")
        _wait(browser, lambda d: _computed(d) > before or _quote_rows(d))
        assert browser.find_element(By.ID, "error").text == ""
        assert Select(browser.find_element(By.ID, "cross_entropy")).first_selected_option.get_attribute("value") == kernel
        rows = _quote_rows(browser)
        assert rows, kernel
        cheapest[kernel] = float(rows[0][3].lstrip("$").replace(",", ""))
    assert cheapest["fused"] < cheapest["eager"]
