"""``gpucost probe`` on the CPU end to end (a tiny Llama-shaped model, real training steps), the
training-loop hooks, and ``gpucost measurements add | list | remove``.

Needs the ``probe`` extra (torch, transformers, peft, bitsandbytes), which CI installs
(``scripts/setup``): these tests fail rather than skip without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from optimizer.errors import InvalidInput
from optimizer.estimator.workload import Workload
from service.cli import app

runner = CliRunner()
# The tiny Llama-shaped decoder of bench/measure_training.py (2 layers, hidden 64, GQA, gated MLP,
# tied embeddings): 106,816 parameters as transformers builds it.
TINY_PARAMS = 106_816
TINY = {"params_b": TINY_PARAMS / 1e9, "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
        "intermediate": 128, "vocab": 512, "name": "tiny-llama"}
WORKLOAD = {"model": TINY, "method": "lora", "precision": "bf16", "micro_batch_size": 2, "seq_len": 64,
            "gradient_checkpointing": False, "tokens": 1_000_000}


def _gpucost(args: list[str], db_url: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    # One thread: the CI box's cores are shared, and a tiny model gains nothing from more.
    env.update(GPUCOST_DB_URL=db_url, XDG_DATA_HOME=str(tmp / "xdg"), OMP_NUM_THREADS="1")
    # The installed console script, as a user runs it.
    return subprocess.run([str(Path(sys.executable).with_name("gpucost")), *args],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture
def request_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(WORKLOAD), encoding="utf-8")
    return path


def test_probe_add_then_estimate_on_cpu_says_measured(request_file: Path, tmp_path: Path, tmp_db_url: str) -> None:
    out = tmp_path / "m.json"
    probe = _gpucost(["probe", "--request", str(request_file), "--device", "cpu", "--steps", "5", "--warmup", "3",
                      "--json", "--out", str(out)], tmp_db_url, tmp_path)
    assert probe.returncode == 0, probe.stderr
    record = json.loads(probe.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == record
    assert (record["gpu"], record["device_name"], record["source"], record["fits"]) == ("cpu", "cpu", "probe", True)
    assert record["steps"] == 5 and 2 <= record["warmup_steps"] <= 3
    s = record["step_seconds"]
    assert 0 < s["p10"] <= s["median"] <= s["p90"]
    assert record["tokens_per_second"] > 0 and record["model_params"] == TINY_PARAMS
    assert 0 < record["trainable_params"] < TINY_PARAMS  # LoRA adapters only
    assert {"torch", "transformers", "peft"} <= set(record["software"])

    # Before it is stored, the CPU has no estimate.
    before = _gpucost(["estimate", "--request", str(request_file), "--gpu", "cpu", "--json"], tmp_db_url, tmp_path)
    assert before.returncode == 2 and "gpucost probe --device cpu" in before.stderr

    added = _gpucost(["measurements", "add", str(out), "--json"], tmp_db_url, tmp_path)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["added"] == [record["id"]]

    est = _gpucost(["estimate", "--request", str(request_file), "--gpu", "cpu", "--json"], tmp_db_url, tmp_path)
    assert est.returncode == 0, est.stderr
    doc = json.loads(est.stdout)
    assert (doc["basis"], doc["measurement_id"], doc["gpu"]) == ("measured", record["id"], "cpu")
    assert doc["tokens_per_second"] == pytest.approx(record["tokens_per_second"], rel=1e-3)
    assert doc["hours"] == pytest.approx(1_000_000 / record["tokens_per_second"] / 3600, rel=0.05, abs=0.3)

    listed = _gpucost(["measurements", "list", "--json"], tmp_db_url, tmp_path)
    assert [m["id"] for m in json.loads(listed.stdout)["measurements"]] == [record["id"]]
    removed = _gpucost(["measurements", "remove", record["id"], "--json"], tmp_db_url, tmp_path)
    assert removed.returncode == 0 and json.loads(removed.stdout) == {"removed": record["id"]}
    again = _gpucost(["estimate", "--request", str(request_file), "--gpu", "cpu", "--json"], tmp_db_url, tmp_path)
    assert again.returncode == 2


def test_qlora_with_checkpointing_and_full_run_on_cpu(request_file: Path, tmp_path: Path, tmp_db_url: str) -> None:
    # bitsandbytes >= 0.45 runs NF4 Linear4bit on the CPU: QLoRA is probed there too.
    # The workload from flags alone, the model's dimensions inline.
    qlora = _gpucost(["probe", "--model", json.dumps(TINY), "--method", "qlora", "--batch", "2", "--seq-len", "64",
                      "--gradient-checkpointing", "--device", "cpu", "--steps", "2", "--warmup", "2", "--json"],
                     tmp_db_url, tmp_path)
    assert qlora.returncode == 0, qlora.stderr
    rec = json.loads(qlora.stdout)
    assert rec["workload"]["method"] == "qlora" and rec["workload"]["gradient_checkpointing"] is True
    assert rec["workload"]["precision"] == "bf16"  # "auto" resolved: bf16 on the CPU
    assert rec["model_params"] == TINY_PARAMS and "bitsandbytes" in rec["software"]
    full = _gpucost(["probe", "--request", str(request_file), "--method", "full", "--precision", "fp32",
                     "--device", "cpu", "--steps", "2", "--warmup", "2", "--json"], tmp_db_url, tmp_path)
    assert full.returncode == 0, full.stderr
    assert json.loads(full.stdout)["trainable_params"] == TINY_PARAMS


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--device", "cpu", "--precision", "fp16"], "workload.precision"),
        (["--device", "cpu", "--offload", "optimizer"], "workload.offload"),
        (["--device", "tpu"], "--device"),
        ([], "--device cpu"),  # no CUDA here: says how to probe the CPU
        (["--device", "cpu", "--gpu-index", "0"], "--device"),
    ],
)
def test_probe_refusals_exit_2_naming_the_field(request_file: Path, args: list[str], needle: str) -> None:
    result = runner.invoke(app, ["probe", "--request", str(request_file), "--steps", "1", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr


def test_probe_without_torch_says_what_to_install(request_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import service.probe.run as run

    monkeypatch.setattr(run, "importable", lambda names=(): frozenset())
    result = runner.invoke(app, ["probe", "--request", str(request_file), "--device", "cpu"])
    assert result.exit_code == 2
    assert "pip install 'gpucost[probe]'" in result.stderr


def test_out_of_memory_is_a_fit_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    import service.probe.run as run

    def oom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(run, "build_model", oom)
    m = run.probe(Workload.model_validate(WORKLOAD), device="cpu", steps=1, max_warmup=0)
    assert m.fits is False and m.step_seconds is None
    assert m.notes.startswith("does not fit at micro-batch 2")


def test_bad_measurement_files_exit_2_and_store_nothing(tmp_path: Path, tmp_db_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    good = json.loads((Path(__file__).resolve().parents[1] / "data" / "probe" / "rtx4090_bert_base.json")
                      .read_text(encoding="utf-8"))
    bad = {**good, "step_seconds": {"median": 323.2, "p10": 320.0, "p90": 330.0}}
    path = tmp_path / "two.json"
    path.write_text(json.dumps([good, bad]), encoding="utf-8")
    result = runner.invoke(app, ["measurements", "add", str(path)])
    assert result.exit_code == 2
    assert "[1].step_seconds.median" in result.stderr and "milliseconds" in result.stderr
    listed = runner.invoke(app, ["measurements", "list", "--json"])
    assert listed.exit_code == 0, (listed.output, listed.exception)
    assert json.loads(listed.stdout) == {"measurements": []}
    gone = runner.invoke(app, ["measurements", "remove", "m-000000000000"])
    assert gone.exit_code == 2 and "ID" in gone.stderr
    missing = runner.invoke(app, ["measurements", "add", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr


# --- hooks ---------------------------------------------------------------------------------------


def _plain_model() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(128, 32), torch.nn.Linear(32, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 128))


def test_plain_loop_hook_writes_a_record_measurements_add_accepts(tmp_path: Path, tmp_db_url: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from service.probe.hooks import measure_training

    model = _plain_model()
    params = sum(p.numel() for p in model.parameters())
    workload = {"model": {"params_b": params / 1e9}, "method": "full", "precision": "fp32",
                "micro_batch_size": 4, "seq_len": 16, "gradient_checkpointing": False}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = tmp_path / "loop.json"
    with measure_training(workload, out=out, model=model, warmup_steps=2) as probe:
        for _ in range(8):
            ids = torch.randint(0, 128, (4, 16))
            with probe.step():
                loss = torch.nn.functional.cross_entropy(model(ids).reshape(-1, 128), ids.reshape(-1))
                loss.backward()
                opt.step()
                opt.zero_grad()
    record = json.loads(out.read_text(encoding="utf-8"))
    assert (record["source"], record["steps"], record["warmup_steps"], record["gpu"]) == ("training-loop", 6, 2, "cpu")
    assert record["model_params"] == params
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    added = runner.invoke(app, ["measurements", "add", str(out), "--json"])
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["added"] == [record["id"]]

    # The same loop said to be another model's is refused, naming the field.
    other = {**workload, "model": {"params_b": params * 20 / 1e9}}
    with pytest.raises(InvalidInput) as info, measure_training(other, model=model, warmup_steps=0) as probe:
        with probe.step():
            model(torch.randint(0, 128, (4, 16))).sum().backward()
    assert info.value.field == "model_params"


def test_trainer_and_lightning_callbacks_write_the_same_record(tmp_path: Path) -> None:
    from service.probe.hooks import lightning_callback, trainer_callback

    model = _plain_model()
    params = sum(p.numel() for p in model.parameters())
    workload = {"model": {"params_b": params / 1e9}, "method": "full", "precision": "fp32",
                "micro_batch_size": 2, "seq_len": 8, "gradient_checkpointing": False}
    hf_out, pl_out = tmp_path / "hf.json", tmp_path / "pl.json"
    hf = trainer_callback(workload, out=hf_out, warmup_steps=1)
    args = SimpleNamespace(gradient_accumulation_steps=2, world_size=1)
    hf.on_train_begin(args, None, None, model=model)
    for _ in range(4):
        hf.on_step_begin(args, None, None)
        time.sleep(0.02)
        hf.on_step_end(args, None, None)
    hf.on_train_end(args, None, None)
    rec = json.loads(hf_out.read_text(encoding="utf-8"))
    # Each optimizer step is two micro-batches here: recorded per micro-batch.
    assert rec["steps"] == 3 and 0.009 <= rec["step_seconds"]["median"] <= 0.05

    pl = lightning_callback(workload, out=pl_out, warmup_steps=0)
    pl.on_train_start(None, model)
    for i in range(3):
        pl.on_train_batch_start(None, model, None, i)
        time.sleep(0.01)
        pl.on_train_batch_end(None, model, None, None, i)
    pl.on_train_end(None, model)
    rec = json.loads(pl_out.read_text(encoding="utf-8"))
    assert rec["steps"] == 3 and rec["model_params"] == params and rec["source"] == "training-loop"


def test_cli_quote_uses_a_stored_measurement_until_removed(tmp_path: Path, tmp_db_url: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    record_file = Path(__file__).resolve().parents[1] / "data" / "probe" / "rtx4090_bert_base.json"
    request = tmp_path / "quote.json"
    request.write_text(json.dumps({"workload": json.loads(record_file.read_text(encoding="utf-8"))["workload"],
                                   "constraints": {"gpus": ["RTX4090"], "max_gpus": 1}, "top": 5}))

    def options() -> list[dict[str, Any]]:
        result = runner.invoke(app, ["quote", "--request", str(request), "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["options"]  # type: ignore[no-any-return]

    before = options()
    added = runner.invoke(app, ["measurements", "add", str(record_file), "--json"])
    assert added.exit_code == 0, added.output
    mid = json.loads(added.stdout)["added"][0]
    after = options()
    assert before and {(o["basis"], o["measurement_id"]) for o in after} == {("measured", mid)}
    # The CLI's fast path (a prepared snapshot, no SQLAlchemy) reads them from the SQLite file.
    from pricing.store.measurement_peek import measurements_of
    from pricing.store.peek import sqlite_path

    db_file = sqlite_path(tmp_db_url)
    assert db_file is not None
    assert [m.id for m in measurements_of(SimpleNamespace(db_file=db_file))] == [mid]
    assert all(a["hours"] != b["hours"] for a, b in zip(after, before, strict=True))
    assert runner.invoke(app, ["measurements", "remove", mid]).exit_code == 0
    assert options() == before
