"""Issue 19 through the public entry points (HTTP and the CLI) on the bundled snapshot: every option
trains the requested global batch, keeps headroom on its card or says so, rests on a plausible
price with its age, runs DDP first, values a bought machine one way, is slowed (not rejected) by a
CPU-short host, and a family GPU name asks for each of its boards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
HEADLINE = {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8}
RESNET = {"model": "resnet50", "samples": 1e7, "global_batch_size": 256}


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('truth') / 'gpucost.sqlite'}"


@pytest.fixture(scope="module")
def client(db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=db_url))) as c:
        yield c


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, db_url: str):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    from service.settings import get_settings

    get_settings.cache_clear()

    def run(*args: str) -> Any:
        result = runner.invoke(app, list(args))
        return result

    yield run
    get_settings.cache_clear()


def _quote(client: TestClient, workload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/quote", json={"workload": workload, **extra})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _shown(q: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in [q["best"], q.get("fastest"), *q["options"]] if o]


def _trains(o: dict[str, Any], batch: int) -> None:
    r = o["recipe"]
    assert r["global_batch_size"] == batch == r["requested_global_batch_size"], o["instance_type"]
    assert r["micro_batch_size"] * r["gradient_accumulation_steps"] * r["data_parallel_gpus"] == batch
    total = o["gpus_per_node"] * o["nodes"]
    if float(total).is_integer() and total >= 1:
        # Every GPU paid for either trains or is reported idle.
        assert r["data_parallel_gpus"] + r["idle_gpus"] == total, o["instance_type"]


# -- 1. the job is the job ----------------------------------------------------------------------


def test_headline_job_every_option_and_fastest_train_global_batch_16(client: TestClient) -> None:
    q = _quote(client, HEADLINE, top=40)
    assert q["fastest"] is not None and q["fastest"]["gpus_per_node"] * q["fastest"]["nodes"] > 1
    for o in _shown(q):
        _trains(o, 16)


def test_resnet50_at_256_every_option_trains_256_cli(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("quote", "--model", "resnet50", "--samples", "1e7", "--global-batch-size", "256", "--top", "30", "--json")
    assert r.exit_code == 0, r.output
    q = json.loads(r.stdout)
    for o in _shown(q):
        _trains(o, 256)


def test_five_gpus_keep_batch_16_with_one_idle_and_say_so(client: TestClient) -> None:
    q = _quote(client, HEADLINE, constraints={"gpus": ["RTX4090"], "providers": ["vast"]}, top=20)
    five = next(o for o in q["options"] if o["gpus_per_node"] == 5)
    assert five["recipe"]["data_parallel_gpus"] == 4 and five["recipe"]["idle_gpus"] == 1
    _trains(five, 16)
    assert any("1 of 5 GPUs idle" in w for w in five["warnings"])


def test_a_batch_the_gpus_cannot_share_is_rejected_with_the_reason(client: TestClient) -> None:
    # 7 is prime: 2 GPUs train it on one (one idle), 4 or 5 GPUs would leave most of them idle.
    q = _quote(client, {**HEADLINE, "global_batch_size": 7},
               constraints={"gpus": ["RTX4090"], "providers": ["vast"], "include_local": False}, top=20)
    for o in _shown(q):
        _trains(o, 7)
    reasons = {g["reason"] for g in q["rejected"]}
    assert "cannot keep global batch 7 on 4 GPUs" in reasons, reasons
    assert "cannot keep global batch 7 on 5 GPUs" in reasons, reasons


def test_markdown_shows_idle_gpus_and_option_warnings(client: TestClient) -> None:
    r = client.post("/v1/quote?format=markdown",
                    json={"workload": HEADLINE, "constraints": {"gpus": ["RTX4090"], "providers": ["vast"]}, "top": 20})
    assert r.status_code == 200, r.text
    assert "1 GPU(s) idle" in r.text and "1 of 5 GPUs idle" in r.text


# -- 2. headroom --------------------------------------------------------------------------------


def test_no_option_above_95_percent_of_its_card_without_a_warning(client: TestClient) -> None:
    q = _quote(client, HEADLINE, top=40, runs=4)
    tight = 0
    for o in _shown(q):
        if o["memory_need_gb_per_gpu"] > 0.95 * o["vram_gb_per_gpu"]:
            tight += 1
            assert any(w.startswith("tight fit:") for w in o["warnings"]), o
    # The recipe search took headroom where it could: the old tight picks (3080 at 9.8 of 10 GB, 2 x H100
    # at 79.96 of 80 GB) are gone or warned; what stays tight is the rare card where nothing else fits.
    assert tight <= 2


def test_safety_margin_keeps_that_share_free(client: TestClient, cli) -> None:  # type: ignore[no-untyped-def]
    est = client.post("/v1/estimate", json={"workload": HEADLINE, "gpu": "RTX4090"}).json()
    low, high = est["range"]["total_per_gpu"]
    point = est["memory_gb"]["total_per_gpu"]
    margin = round(high / point - 1, 3)  # the range's upper end, as a share kept free
    q = _quote(client, HEADLINE, constraints={"safety_margin": margin}, top=40)
    assert q["best"] is not None
    for o in _shown(q):
        assert o["memory_need_gb_per_gpu"] <= (1 - margin) * o["vram_gb_per_gpu"] + 1e-6, o
    r = cli("quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8",
            "--safety-margin", str(margin), "--json")
    assert r.exit_code == 0, r.output
    for o in _shown(json.loads(r.stdout)):
        assert o["memory_need_gb_per_gpu"] <= (1 - margin) * o["vram_gb_per_gpu"] + 1e-6
    bad = client.post("/v1/quote", json={"workload": HEADLINE, "constraints": {"safety_margin": 1.5}})
    assert bad.status_code == 422 and "safety_margin" in bad.text
    r = cli("quote", "--model", "llama-3-8b", "--safety-margin", "2")
    assert r.exit_code == 2 and "--safety-margin" in r.output


# -- 3. prices that exist -----------------------------------------------------------------------

SPOT_EXAMPLE = ["quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8", "--runs", "4",
                "--deadline-hours", "24", "--spot", "--json"]


def test_readme_spot_example_picks_no_price_its_answer_calls_implausible(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli(*SPOT_EXAMPLE)
    assert r.exit_code == 0, r.output
    q = json.loads(r.stdout)
    best = q["best"]
    assert not any(w.startswith("implausible price:") and f"{best['provider']}/{best['instance_type']}" in w
                   for w in q["warnings"])
    assert any(g["reason"].startswith("suspect price:") for g in q["rejected"])
    now = datetime.now(UTC)
    for o in _shown(q):
        assert o["price_age_days"] is not None
        as_of = datetime.fromisoformat(o["as_of"].replace("Z", "+00:00"))
        assert abs(o["price_age_days"] - (now - as_of).total_seconds() / 86400) < 1
    # Allowed, the suspect price may win again, and the answer says it is implausible.
    r = cli(*SPOT_EXAMPLE, "--allow-suspect-prices")
    allowed = json.loads(r.stdout)
    assert allowed["best"]["cost_usd"] < best["cost_usd"]
    assert any(w.startswith("implausible price:") for w in allowed["warnings"])


# -- 4. DDP first; one resale valuation -----------------------------------------------------------


def test_auto_sharding_takes_ddp_where_it_fits(client: TestClient) -> None:
    q = _quote(client, HEADLINE, top=40)
    multi = [o for o in _shown(q) if o["recipe"]["data_parallel_gpus"] > 1]
    assert multi and "ddp" in {o["sharding"] for o in multi}
    for o in multi:
        if o["sharding"] != "ddp":
            # A heavier scheme only where plain DDP does not fit that card, or only without headroom.
            n = o["recipe"]["data_parallel_gpus"]
            ddp = client.post("/v1/estimate", json={"workload": {**HEADLINE, "sharding": "ddp"}, "gpu": o["gpu"],
                                                    "gpu_count": n}).json()
            high = ddp["range"]["total_per_gpu"][1]
            tight = high > ddp["gpu_vram_gb"] or ddp["memory_gb"]["total_per_gpu"] >= 0.95 * ddp["gpu_vram_gb"]
            assert ddp["fits"] is False or tight, o


def test_quote_and_breakeven_value_a_bought_machine_alike(client: TestClient) -> None:
    # 48 runs: the quote sells the build at the end of its life, as break-even does at that month.
    q = _quote(client, HEADLINE, constraints={"providers": ["local"]}, runs=48, top=10)
    local = q["best"]
    assert local["kind"] == "local"
    per_machine_quote = -local["cost_breakdown"]["resale_usd"] / local["machines"]
    be = client.post("/v1/breakeven", json={"workload": HEADLINE, "rent": {"gpu": "RTX4090"},
                                            "buy": {"build": local["instance_type"]}, "runs_per_month": 1})
    assert be.status_code == 200, be.text
    buy = be.json()["buy"]
    assert per_machine_quote == pytest.approx(buy["resale_usd"] / buy["machines"], rel=1e-3)


# -- 6. host feeding ------------------------------------------------------------------------------


def test_resnet50_on_8_a100_offers_96_vcpu_nodes_fed_by_gpu_decoding(client: TestClient) -> None:
    q = _quote(client, RESNET, constraints={"gpus": ["A100"], "providers": ["aws", "gcp"], "include_local": False},
               top=30)
    eight = [o for o in q["options"] if o["gpus_per_node"] == 8]
    # Both 96-vCPU nodes are offered, not rejected for their host: at full speed where their cores
    # (or GPU JPEG decoding) feed the GPUs, else slower with a note (tests/unit/test_host_feeding.py).
    assert {o["instance_type"] for o in eight} >= {"p4d.24xlarge", "a2-highgpu-8g"}
    full = client.post("/v1/estimate", json={"workload": RESNET, "gpu": "A100", "gpu_count": 8}).json()
    for o in eight:
        slowed = any(w.startswith("host feeding:") and "as long" in w for w in o["warnings"])
        assert o["hours"] == pytest.approx(full["hours"], rel=1e-3) or slowed, o


# -- 8. a family name -----------------------------------------------------------------------------


def test_h100_asks_for_pcie_and_sxm_each_by_its_own_spec(client: TestClient, cli) -> None:  # type: ignore[no-untyped-def]
    q = _quote(client, HEADLINE, constraints={"gpus": ["H100"], "providers": ["lambda"]}, top=20)
    by_gpu = {o["gpu"]: o for o in q["options"] if o["gpus_per_node"] == 1}
    assert {"H100", "H100-PCIE"} <= set(by_gpu)
    assert by_gpu["H100-PCIE"]["instance_type"] == "gpu_1x_h100_pcie"
    assert by_gpu["H100-PCIE"]["hours"] > by_gpu["H100"]["hours"]  # the PCIe board is slower
    sxm = _quote(client, HEADLINE, constraints={"gpus": ["H100-SXM"], "providers": ["lambda"]}, top=20)
    assert all(o["gpu"] == "H100" for o in sxm["options"])
    offers = client.get("/v1/offers", params={"gpu": "H100", "provider": "lambda"}).json()["offers"]
    assert "gpu_1x_h100_pcie" in {o["instance_type"] for o in offers}
    r = cli("offers", "--gpu", "H100", "--provider", "lambda", "--json")
    assert r.exit_code == 0, r.output
    assert "gpu_1x_h100_pcie" in {o["instance_type"] for o in json.loads(r.stdout)["offers"]}


# -- 5. subscriptions -----------------------------------------------------------------------------


def test_colab_splits_a_7_hour_run_into_sessions_and_bills_the_month(client: TestClient, cli) -> None:  # type: ignore[no-untyped-def]
    # A job of about 6.3 h on Colab's A100: past a Pro session (planned at 6 h), within one Pro+
    # session (12 h). Hours are a fixed set-up plus a time per token, so the amount is set from the
    # estimator's own figures at two amounts.
    def plus_hours(amount: float) -> float:
        q = _quote(client, {**HEADLINE, "tokens": amount},
                   constraints={"providers": ["colab"], "gpus": ["A100"], "allow_suspect_prices": True})
        return float({o["instance_type"]: o for o in q["options"]}["colab-pro-plus-a100"]["hours"])

    h1, h2 = plus_hours(1e7), plus_hours(2e7)
    per_token = (h2 - h1) / 1e7
    tokens = float(f"{(6.3 - (h1 - per_token * 1e7)) / per_token:.3g}")
    job = {**HEADLINE, "tokens": tokens}
    # Colab's bundled prices are from 2022: older than the age limit, so only when allowed.
    default = _quote(client, job, constraints={"providers": ["colab"], "gpus": ["A100"]})
    assert default["best"] is None
    assert any(g["reason"].startswith("suspect price: older than") for g in default["rejected"])
    q = _quote(client, job, constraints={"providers": ["colab"], "gpus": ["A100"], "allow_suspect_prices": True})
    by = {o["instance_type"]: o for o in q["options"]}
    pro, plus = by["colab-pro-a100"], by["colab-pro-plus-a100"]
    assert 6 < plus["hours"] < 12  # one Pro+ session (planned at 12 h)
    (note,) = [w for w in pro["warnings"] if w.startswith("Colab Pro:")]
    assert "split into 2 sessions" in note and "browser must stay open" in note and "not guaranteed" in note
    assert pro["hours"] > plus["hours"]  # the restart between the two sessions is counted
    # Pro+'s month costs its fee, however few units one run draws.
    assert plus["cost_usd"] == pytest.approx(49.99) and plus["cost_breakdown"]["subscription_fee_floor_usd"] > 0
    deadline = (pro["hours"] + plus["hours"]) / 2  # between one Pro+ session and two Pro sessions
    r = cli("quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", str(tokens), "--provider", "colab",
            "--gpu", "A100", "--allow-suspect-prices", "--deadline-hours", f"{deadline:.2f}", "--json")
    assert r.exit_code == 0, r.output
    late = json.loads(r.stdout)
    # Split into sessions the Pro run misses a deadline that one Pro+ session meets; the rejection says so.
    assert late["best"]["instance_type"] == "colab-pro-plus-a100"
    assert "colab-pro-a100" not in {o["instance_type"] for o in late["options"]}
    assert any(g["reason"] == "misses deadline" and "colab/colab-pro-a100" in g["examples"] for g in late["rejected"])


# -- 7. storage, egress, idle power --------------------------------------------------------------


def test_egress_is_priced_per_provider_and_storage_everywhere(client: TestClient) -> None:
    from optimizer.egress_prices import EGRESS
    from optimizer.storage_prices import BLOCK_STORAGE

    for provider in ("azure", "vast", "nebius"):
        assert BLOCK_STORAGE[provider].source and BLOCK_STORAGE[provider].as_of
    q = _quote(client, HEADLINE, constraints={"providers": ["aws", "gcp", "azure", "vast"], "egress_gb": 100,
                                              "include_local": False}, top=40)
    seen = set()
    for o in q["options"]:
        b = o["cost_breakdown"]
        price = EGRESS[o["provider"]]
        if price is None:
            assert any(w.startswith("egress not priced:") for w in o["warnings"])
        else:
            assert b["egress_usd"] == pytest.approx(100 * price.usd_per_gb, abs=1e-3)
        if o["provider"] in ("azure", "vast"):
            assert b["storage_usd"] > 0
        seen.add(o["provider"])
    assert {"aws", "vast"} <= seen
    bad = client.post("/v1/quote", json={"workload": HEADLINE, "constraints": {"egress_gb": -1}})
    assert bad.status_code == 422 and "egress_gb" in bad.text


def test_owned_machines_pay_idle_power_between_runs(client: TestClient) -> None:
    q = _quote(client, HEADLINE, constraints={"providers": ["local"]}, runs=10, top=5)
    local = q["best"]
    assert local["cost_breakdown"]["idle_energy_usd"] > 0
    be = client.post("/v1/breakeven", json={"workload": HEADLINE, "rent": {"gpu": "RTX4090"},
                                            "buy": {"build": local["instance_type"]}}).json()
    assert any("idle power between runs" in n for n in be["notes"])


def test_plan_assignments_train_the_jobs_global_batch(client: TestClient) -> None:
    job = {"name": "weekly", "workload": {**HEADLINE, "global_batch_size": 32}, "runs_per_month": 4,
           "deadline_hours": 24}
    r = client.post("/v1/plan", json={"jobs": [job], "horizon_months": 6})
    assert r.status_code == 200, r.text
    rows = r.json()["assignments"]
    assert rows
    for a in rows:
        rec = a["recipe"]
        assert rec["global_batch_size"] == 32 == rec["requested_global_batch_size"]
        assert rec["micro_batch_size"] * rec["gradient_accumulation_steps"] * rec["data_parallel_gpus"] == 32
