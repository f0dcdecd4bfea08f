"""Answers that follow how the job would run, through the HTTP API and the CLI on the bundled
snapshot: a recipe fitted per option, a pinned recipe honoured, machines sized to the hours,
budgets capping cash, rentals judged on the job's host needs, setup billed once, several nodes only
over an inter-node fabric, and suggestions when nothing fits."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from optimizer.offer import has_inter_node_fabric
from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
GIB_PER_GB = 2**30 / 1e9
DEFAULT = {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8}
DEFAULT_FLAGS = ["--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8"]
PINNED = {**DEFAULT, "micro_batch_size": 8, "gradient_checkpointing": False}
SMALL_AWS = {"g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge"}  # one GPU, 16 GB (g6e: 32 GB) RAM


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('recipes') / 'gpucost.sqlite'}"


@pytest.fixture(scope="module")
def client(db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=db_url))) as c:
        yield c


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", db_url)
    from service.settings import get_settings

    get_settings.cache_clear()


def cli_json(*args: str) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def post(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def assert_recipe_makes_up_the_batch(o: dict[str, Any], global_batch: int = 16) -> None:
    r = o["recipe"]
    assert r is not None, o
    assert r["micro_batch_size"] * r["gradient_accumulation_steps"] * r["data_parallel_gpus"] == r["global_batch_size"]
    assert r["global_batch_size"] >= global_batch and r["requested_global_batch_size"] == global_batch
    if float(o["gpus_per_node"]).is_integer():
        assert r["data_parallel_gpus"] == int(o["gpus_per_node"]) * o["nodes"]
    assert o["memory_need_gb_per_gpu"] <= o["vram_gb_per_gpu"] * GIB_PER_GB


def _24gb(options: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cloud = [o for o in options if o["kind"] == "cloud" and o["gpu"] in ("RTX4090", "RTX3090")]
    local = [o for o in options if o["kind"] == "local" and o["gpu"] in ("RTX4090", "RTX3090")]
    return cloud, local


def test_default_quote_ranks_24gb_cards_each_with_its_recipe(client: TestClient) -> None:
    q = post(client, "/v1/quote", {"workload": DEFAULT, "top": 20})
    for o in q["options"]:
        assert_recipe_makes_up_the_batch(o)
    cloud, local = _24gb(q["options"])
    assert cloud and local, [(o["kind"], o["gpu"]) for o in q["options"]]
    # On a 24 GB card the job runs a smaller micro-batch with accumulation, not the whole batch at once.
    assert all(o["recipe"]["gradient_accumulation_steps"] > 1 for o in cloud + local if o["nodes"] == 1
               and o["gpus_per_node"] == 1)
    assert "insufficient VRAM" not in {g["reason"] for g in q["rejected"] if any(
        ex.startswith(("autodl/autodl-rtx4090", "local/tier-a")) for ex in g["examples"])}
    # The CLI answers the same.
    c = cli_json("quote", *DEFAULT_FLAGS, "--top", "20")
    assert [(o["instance_type"], o["recipe"]) for o in c["options"]] == [
        (o["instance_type"], o["recipe"]) for o in q["options"]
    ]
    table = runner.invoke(app, ["quote", *DEFAULT_FLAGS])
    assert table.exit_code == 0 and "recipe" in table.stdout


def test_pinned_recipe_is_honoured_on_every_option(client: TestClient) -> None:
    q = post(client, "/v1/quote", {"workload": PINNED, "top": 20})
    c = cli_json("quote", *DEFAULT_FLAGS, "--micro-batch-size", "8", "--no-gradient-checkpointing", "--top", "20")
    for answer in (q, c):
        assert answer["best"] is not None
        for o in [answer["best"], *answer["options"]]:
            r = o["recipe"]
            assert (r["micro_batch_size"], r["gradient_checkpointing"]) == (8, False)
            assert r["gradient_accumulation_steps"] == max(1, math.ceil(16 / (8 * r["data_parallel_gpus"])))
            assert "micro_batch_size" not in r["chosen"] and "gradient_checkpointing" not in r["chosen"]
        # 37+ GB at micro-batch 8 without checkpointing: no 24 GB card can take it as pinned.
        assert _24gb(answer["options"]) == ([], [])


@pytest.mark.parametrize("runs_per_month", [4, 60])
def test_rent_a100_or_buy_4090_sizes_the_machines(client: TestClient, runs_per_month: int) -> None:
    body = {"workload": DEFAULT, "rent": {"gpu": "A100-80GB"}, "buy": {"gpu": "RTX4090"},
            "runs_per_month": runs_per_month}
    h = post(client, "/v1/breakeven", body)
    c = cli_json("breakeven", *DEFAULT_FLAGS, "--rent-gpu", "A100-80GB", "--buy-gpu", "RTX4090",
                 "--runs-per-month", str(runs_per_month))
    for r in (h, c):
        b = r["buy"]
        need = runs_per_month * b["hours_per_run"]
        assert b["hours_per_month_needed"] == pytest.approx(need, rel=1e-3)
        # machines x 730 h cover the hours, at no more than the stated utilisation, and no spare machine.
        assert b["machine_hours_per_month"] == b["machines"] * 730
        assert b["machines"] * 730 * b["max_utilization"] >= need > (b["machines"] - 1) * 730 * b["max_utilization"]
        assert b["utilization"] == pytest.approx(need / (b["machines"] * 730), abs=1e-3)
        assert b["capex_usd"] == pytest.approx(b["machines"] * b["price_per_machine_usd"], abs=0.01)
        assert b["option"]["recipe"] and r["rent"]["option"]["recipe"]
        # One resale curve: the horizon answer agrees with the break-even month.
        m = r["breakeven_months"]
        assert (r["cheaper_at_horizon"] == "buy") == (m is not None and m <= r["horizon_months"])
    assert (h["buy"]["machines"], h["breakeven_months"]) == (c["buy"]["machines"], c["breakeven_months"])
    if runs_per_month == 60:
        assert h["buy"]["machines"] >= 2  # 60 runs of a 4090-day's job exceed one machine's month


def test_local_budget_caps_the_cash_outlay(client: TestClient) -> None:
    q = post(client, "/v1/quote", {"workload": DEFAULT, "constraints": {"budget_usd": 2500, "providers": ["local"]},
                                   "top": 20})
    c = cli_json("quote", *DEFAULT_FLAGS, "--budget", "2500", "--provider", "local", "--top", "20")
    for answer in (q, c):
        assert answer["best"] is not None and answer["options"]
        for o in answer["options"]:
            assert o["outlay_usd"] <= 2500 and o["outlay_usd"] >= o["cost_usd"]
        over = next(g for g in answer["rejected"] if g["reason"] == "over budget")
        assert over["count"] >= 1


def test_bert_base_on_aws_lists_small_single_gpu_instances(client: TestClient) -> None:
    body = {"workload": {"model": "bert-base", "tokens": 1e8}, "constraints": {"providers": ["aws"]}, "top": 30}
    q = post(client, "/v1/quote", body)
    c = cli_json("quote", "--model", "bert-base", "--tokens", "1e8", "--provider", "aws", "--top", "30")
    for answer in (q, c):
        assert answer["best"]["gpus_per_node"] == 1
        listed = {o["instance_type"] for o in answer["options"]}
        assert {"g4dn.xlarge", "g5.xlarge", "g6.xlarge"} & listed, listed
        ram_short = next((g for g in answer["rejected"] if g["reason"] == "insufficient host RAM"), None)
        assert ram_short is None or not SMALL_AWS & {e.split("/", 1)[1] for e in ram_short["examples"]}


def test_setup_is_billed_once(client: TestClient) -> None:
    q = post(client, "/v1/quote", {"workload": DEFAULT, "constraints": {"providers": ["aws"]}, "top": 5})
    o = next(o for o in q["options"] if o["gpus_per_node"] == 1 and o["nodes"] == 1)
    # The option's own recipe (with headroom it may be smaller than the estimate's tightest fit).
    r = o["recipe"]
    own = {**DEFAULT, "micro_batch_size": r["micro_batch_size"], "gradient_checkpointing": r["gradient_checkpointing"]}
    e = post(client, "/v1/estimate", {"workload": own, "gpu": o["gpu"], "gpu_count": 1})
    # The run's hours are the estimate's (its setup included), with no second setup allowance.
    assert o["hours"] == pytest.approx(e["hours"], abs=1e-3)
    assert o["cost_breakdown"]["setup_usd"] == pytest.approx(
        o["hourly_usd"] * e["details"]["hours_parts"]["setup_hours"], abs=1e-3)


def test_several_nodes_only_over_an_inter_node_fabric(client: TestClient) -> None:
    # A global batch large enough to keep many GPUs busy: at 16 sequences per step a QLoRA step
    # on dozens of GPUs is all per-call dequantization and data-parallel overhead (issue 18).
    q = post(client, "/v1/quote", {"workload": {**DEFAULT, "global_batch_size": 256}, "top": 50})
    multi = [o for o in [q["fastest"], *q["options"]] if o and o["nodes"] > 1]
    assert multi, "the fastest way to run the job uses several nodes"
    for o in multi:
        assert has_inter_node_fabric(o["provider"], o["instance_type"]), o["instance_type"]


def test_many_runs_buy_enough_machines(client: TestClient) -> None:
    q = post(client, "/v1/quote", {"workload": DEFAULT, "runs": 2000, "top": 20})
    local = [o for o in q["options"] if o["kind"] == "local"]
    assert local
    for o in local:
        need = 2000 * o["hours"] * o["nodes"]
        life = 48 if o["instance_type"].startswith("workstation") else 36
        assert o["machines"] * 730 * 0.8 * life >= need
        assert o["utilization"] == pytest.approx(need / (o["machines"] * 730 * life), rel=1e-3)
        assert o["cost_breakdown"]["capex_usd"] > 0 and o["outlay_usd"] > o["cost_usd"]


def test_estimate_says_what_would_fit(client: TestClient) -> None:
    body = {"workload": PINNED, "gpu": "RTX4090"}
    e = post(client, "/v1/estimate", body)
    c = cli_json("estimate", *DEFAULT_FLAGS, "--micro-batch-size", "8", "--no-gradient-checkpointing",
                 "--gpu", "RTX4090")
    for answer in (e, c):
        assert answer["fits"] is False and answer["suggestions"]
        assert answer["recipe"]["micro_batch_size"] == 8
    assert [s["text"] for s in e["suggestions"]] == [s["text"] for s in c["suggestions"]]
    for s in e["suggestions"]:
        changes = dict(s["changes"])
        count = changes.pop("gpu_count", 1)
        again = post(client, "/v1/estimate", {"workload": {**PINNED, **changes}, "gpu": "RTX4090", "gpu_count": count})
        assert again["fits"], s["text"]
    fits = post(client, "/v1/estimate", {"workload": DEFAULT, "gpu": "RTX4090"})
    assert fits["fits"] and fits["suggestions"] == []


def test_recommend_gives_the_build_floors_as_advice(client: TestClient) -> None:
    r = post(client, "/v1/recommend", {"workload": DEFAULT, "runs_per_month": 60})
    assert any("advice" in n for n in r["notes"])
    rec = r["recommendation"] or r["alternatives"][0]
    assert rec["machines"] >= 1 and rec["capex_usd"] == pytest.approx(rec["machines"] * rec["price_usd"], abs=0.01)
