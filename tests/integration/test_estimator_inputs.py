"""The estimator's inputs (offload, stack, LoRA targets, Adafactor, tf32, image models, samples)
and its answers (range, warnings, phases, samples/s) through HTTP and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
LLAMA = {"model": "llama-2-7b", "method": "full", "micro_batch_size": 1, "seq_len": 2048,
         "gradient_checkpointing": True, "gradient_accumulation_steps": 1, "tokens": 1e8}
RESNET = {"model": "resnet50", "precision": "fp16", "optimizer": "sgd", "micro_batch_size": 256,
          "gradient_checkpointing": False, "gradient_accumulation_steps": 1, "samples": 1_281_167}


@pytest.fixture
def client(tmp_db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        yield c


def _post(client: TestClient, workload: dict, gpu: str = "A100-80GB", n: int = 1) -> dict:
    r = client.post("/v1/estimate", json={"workload": workload, "gpu": gpu, "gpu_count": n})
    assert r.status_code == 200, r.text
    return r.json()


def test_answer_carries_range_warnings_phases_and_samples(client: TestClient) -> None:
    body = _post(client, {**LLAMA, "method": "qlora"})
    low, high = body["range"]["total_per_gpu"]
    assert low < body["memory_gb"]["total_per_gpu"] < high
    tlow, thigh = body["range"]["tokens_per_second"]
    assert tlow < body["tokens_per_second"] < thigh
    assert body["samples_per_second"] == pytest.approx(body["tokens_per_second"] / 2048, rel=0.01)
    assert isinstance(body["warnings"], list)
    phases = body["details"]["memory_phases_gb"]
    assert set(phases) == {"loss", "backward", "optimizer"}
    assert body["details"]["peak_phase"] in phases
    mem = body["memory_gb"]
    assert mem["allocator_peak"] < mem["nvidia_smi"] == mem["total_per_gpu"]


def test_offload_over_http(client: TestClient) -> None:
    base = _post(client, {**LLAMA, "sharding": "zero2"}, n=8)
    off = _post(client, {**LLAMA, "sharding": "zero2", "offload": "optimizer"}, n=8)
    assert off["memory_gb"]["optimizer"] == 0
    assert off["memory_gb"]["total_per_gpu"] < 0.6 * base["memory_gb"]["total_per_gpu"]
    assert off["host"]["ram_gb"] > base["host"]["ram_gb"] + 90
    assert off["tokens_per_second"] < base["tokens_per_second"]
    assert off["details"]["host_ram_parts_gb"]["offloaded_states"] > 90


def test_stack_targets_adafactor_tf32_over_http(client: TestClient) -> None:
    lora = {**LLAMA, "model": "llama-3-8b", "method": "lora"}
    hf = _post(client, lora)
    fused = _post(client, {**lora, "stack": "fused"})
    assert fused["memory_gb"]["total_per_gpu"] < hf["memory_gb"]["total_per_gpu"]
    assert any("stack fused" in w for w in fused["warnings"])
    assert fused["range"]["total_per_gpu"][1] / fused["memory_gb"]["total_per_gpu"] > (
        hf["range"]["total_per_gpu"][1] / hf["memory_gb"]["total_per_gpu"])
    every = _post(client, {**lora, "lora_targets": "all-linear"})
    assert every["trainable_params"] > 2 * hf["trainable_params"]
    ada = _post(client, {**LLAMA, "model": "qwen2.5-0.5b", "optimizer": "adafactor"})
    adam = _post(client, {**LLAMA, "model": "qwen2.5-0.5b"})
    assert ada["memory_gb"]["optimizer"] < 0.05 * adam["memory_gb"]["optimizer"]
    tf32 = _post(client, {**LLAMA, "model": "qwen2.5-0.5b", "precision": "tf32"})
    fp32 = _post(client, {**LLAMA, "model": "qwen2.5-0.5b", "precision": "fp32"})
    assert tf32["tokens_per_second"] > 2 * fp32["tokens_per_second"]


def test_image_models_over_http(client: TestClient) -> None:
    body = _post(client, RESNET)
    assert body["params"] == 25_557_032
    assert 1800 < body["samples_per_second"] < 3100  # DeepLearningExamples: 2470 images/s
    assert body["host"]["cpu_cores"] >= 10
    assert body["details"]["host_feed"]["unit"] == "images"
    vit = _post(client, {**RESNET, "model": "vit-b-16", "micro_batch_size": 64, "image_size": 384})
    assert vit["params"] == 86_567_656
    small = _post(client, {**RESNET, "model": "vit-b-16", "micro_batch_size": 64})
    assert vit["memory_gb"]["total_per_gpu"] > small["memory_gb"]["total_per_gpu"]
    epochs = _post(client, {**{k: v for k, v in RESNET.items() if k != "samples"},
                            "dataset_samples": 1_281_167, "epochs": 2})
    train = body["details"]["hours_parts"]["train_hours"]
    assert epochs["details"]["hours_parts"]["train_hours"] == pytest.approx(2 * train, rel=1e-3)


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({**RESNET, "method": "lora"}, "method"),
        ({**{k: v for k, v in RESNET.items() if k != "samples"}, "tokens": 1e8}, "tokens"),
        ({**LLAMA, "offload": "disk"}, "offload"),
        ({**LLAMA, "stack": "jax"}, "stack"),
        ({**LLAMA, "image_size": 8}, "image_size"),
        ({**LLAMA, "tokens": None, "epochs": 2}, "epochs"),
    ],
)
def test_bad_new_inputs_are_422_naming_the_field(client: TestClient, workload: dict, field: str) -> None:
    r = client.post("/v1/estimate", json={"workload": workload, "gpu": "A100", "gpu_count": 1})
    assert r.status_code == 422, r.text
    assert field in r.text


def test_near_capacity_fit_carries_a_warning(client: TestClient) -> None:
    """A fit whose upper range end crosses the card is flagged, and a roomy one is not."""
    tight = None
    for mb in range(1, 65):
        body = _post(client, {**LLAMA, "model": "qwen2.5-0.5b", "micro_batch_size": mb, "seq_len": 512,
                              "gradient_checkpointing": False}, gpu="RTX4090")
        if not body["fits"]:
            break
        tight = body
    assert tight is not None and tight["fits"]
    assert tight["range"]["total_per_gpu"][1] > tight["gpu_vram_gb"]
    assert any("near capacity" in w for w in tight["warnings"])
    roomy = _post(client, {**LLAMA, "model": "llama-3.2-1b", "micro_batch_size": 1}, gpu="A100-80GB")
    assert not any("near capacity" in w for w in roomy["warnings"])


def test_cli_flags_for_the_new_inputs(tmp_path: Path) -> None:
    args = ["estimate", "--model", "llama-2-7b", "--method", "full", "--batch", "1", "--seq-len", "2048",
            "--gradient-checkpointing", "--sharding", "zero2", "--gpu", "A100-80GB", "--gpus", "8", "--json"]
    base = runner.invoke(app, args)
    off = runner.invoke(app, [*args, "--offload", "optimizer", "--stack", "compiled"])
    assert base.exit_code == 0 and off.exit_code == 0, off.output
    b, o = json.loads(base.stdout), json.loads(off.stdout)
    assert o["memory_gb"]["total_per_gpu"] < b["memory_gb"]["total_per_gpu"]
    assert o["host"]["ram_gb"] > b["host"]["ram_gb"]
    assert o["details"]["stack"] == "compiled"
    img = runner.invoke(app, ["estimate", "--model", "resnet50", "--precision", "fp16", "--optimizer", "sgd",
                              "--batch", "128", "--image-size", "160", "--dataset-samples", "100000",
                              "--epochs", "3", "--gpu", "V100", "--json"])
    assert img.exit_code == 0, img.output
    body = json.loads(img.stdout)
    assert body["samples_per_second"] > 0 and body["details"]["host_feed"]["unit"] == "images"
    lora = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--method", "lora", "--lora-targets",
                               "all-linear", "--optimizer", "adafactor", "--precision", "tf32", "--gpu", "H100",
                               "--json"])
    assert lora.exit_code == 0, lora.output
    human = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--method", "qlora", "--gpu", "RTX4090"])
    assert human.exit_code == 0 and "range:" in human.stdout


@pytest.mark.parametrize(
    ("flag", "value"), [("--offload", "disk"), ("--stack", "jax"), ("--lora-targets", "mlp"), ("--image-size", "8")]
)
def test_cli_bad_new_flags_exit_2(flag: str, value: str) -> None:
    result = runner.invoke(app, ["estimate", "--model", "gpt2", "--gpu", "T4", flag, value])
    assert result.exit_code == 2, result.output
