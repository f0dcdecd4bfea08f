"""The GPU training bench's pure parts: grid, config mapping, row layout, exit codes (no torch)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    path = REPO / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mt() -> ModuleType:
    return _load("measure_training")


def _env(mt: ModuleType, device: str = "cuda") -> object:
    gpu = "H200" if device == "cuda" else "cpu"
    name = "NVIDIA H200" if device == "cuda" else "cpu"
    return mt.Environment(device, name, gpu, {"torch": "2.13.0", "transformers": "5.24.0"}, "2026-11-30")


def test_grid_is_the_full_product_in_order(mt: ModuleType) -> None:
    specs = mt.expand_grid(["llama-3.2-1b", "gpt2"], ["full", "lora"], [1, 4], [512, 2048], [False, True])
    assert len(specs) == 2 * 2 * 2 * 2 * 2
    assert len(set(specs)) == len(specs)
    assert specs[0] == mt.RunSpec("llama-3.2-1b", "full", 1, 512, False)
    assert specs[-1] == mt.RunSpec("gpt2", "lora", 4, 2048, True)
    assert len({s.run_id("H100") for s in specs}) == len(specs)


def test_default_grid_uses_each_models_methods(mt: ModuleType) -> None:
    specs = mt.expand_grid(micro_batches=[1], seq_lens=[1024], checkpointing=[True])
    pairs = {(s.model, s.method) for s in specs}
    assert pairs == {(m, meth) for m, methods in mt.DEFAULT_PLAN.items() for meth in methods}
    assert ("llama-3-8b", "qlora") in pairs and ("llama-3-8b", "full") not in pairs
    # A model outside the default plan defaults to full fine-tuning.
    assert {s.method for s in mt.expand_grid(["bert-base"], None, [1], [128], [False])} == {"full"}


def test_grid_rejects_unknown_method(mt: ModuleType) -> None:
    with pytest.raises(ValueError, match="dora"):
        mt.expand_grid(["gpt2"], ["dora"], [1], [128], [False])


def test_cli_flags_pick_the_grid(mt: ModuleType) -> None:
    args = mt._parser().parse_args(
        ["--models", "qwen2.5-7b,llama-3-8b", "--methods", "qlora", "--micro-batch", "1,2",
         "--seq-len", "4096", "--grad-ckpt", "on", "--optimizer", "adamw_8bit", "--lora-rank", "64"]
    )
    specs = mt.specs_from_args(args)
    assert [(s.model, s.micro_batch) for s in specs] == [
        ("qwen2.5-7b", 1), ("qwen2.5-7b", 2), ("llama-3-8b", 1), ("llama-3-8b", 2)
    ]
    assert all(s.seq_len == 4096 and s.checkpointing and s.optimizer == "adamw_8bit" and s.lora_rank == 64
               for s in specs)


def test_llama_3_8b_config(mt: ModuleType) -> None:
    cfg = mt.hf_config_dict(resolve_model("llama-3-8b"))
    assert cfg["model_type"] == "llama"
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (4096, 32, 32)
    assert (cfg["num_key_value_heads"], cfg["intermediate_size"], cfg["vocab_size"]) == (8, 14336, 128256)
    assert cfg["tie_word_embeddings"] is False


def test_bert_base_config_is_bert_like(mt: ModuleType) -> None:
    cfg = mt.hf_config_dict(resolve_model("bert-base"))
    assert cfg == {
        "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2,
    }


@pytest.mark.parametrize(
    ("preset", "model_type", "checks"),
    [
        ("gpt2", "gpt2", {"n_embd": 768, "n_layer": 12, "n_inner": 3072, "n_positions": 1024}),
        ("qwen2.5-0.5b", "qwen2", {"num_key_value_heads": 2, "tie_word_embeddings": True, "vocab_size": 151936}),
        ("gemma-2b", "gemma", {"head_dim": 256, "num_key_value_heads": 1}),
        ("pythia-1b", "gpt_neox", {"intermediate_size": 8192, "num_attention_heads": 8}),
        ("distilbert", "distilbert", {"dim": 768, "n_layers": 6, "hidden_dim": 3072}),
    ],
)
def test_family_configs(mt: ModuleType, preset: str, model_type: str, checks: dict[str, object]) -> None:
    cfg = mt.hf_config_dict(resolve_model(preset))
    assert cfg["model_type"] == model_type
    assert {k: cfg[k] for k in checks} == checks


def test_encoder_decoder_is_refused(mt: ModuleType) -> None:
    with pytest.raises(ValueError, match="encoder-decoder"):
        mt.hf_config_dict(resolve_model("t5-base"))


def test_skip_reasons(mt: ModuleType) -> None:
    everything = frozenset({"torch", "transformers", "peft", "bitsandbytes"})
    no_bnb = everything - {"bitsandbytes"}
    qlora = mt.RunSpec("llama-3-8b", "qlora", 1, 1024, True)
    assert mt.skip_reason(qlora, everything, "cuda") is None
    assert "bitsandbytes" in (mt.skip_reason(qlora, no_bnb, "cuda") or "")
    assert "peft" in (mt.skip_reason(mt.RunSpec("gpt2", "lora", 1, 512, False), no_bnb - {"peft"}, "cuda") or "")
    assert "CUDA" in (mt.skip_reason(mt.RunSpec("gpt2", "full", 1, 512, False, precision="fp16"), everything, "cpu")
                      or "")
    assert "Conv1D" in (mt.skip_reason(mt.RunSpec("gpt2", "qlora", 1, 512, False), everything, "cuda") or "")
    assert "torch" in (mt.skip_reason(mt.RunSpec("gpt2", "full", 1, 512, False), frozenset(), "cuda") or "")
    # Learned position embeddings cap the sequence.
    assert "512" in (mt.skip_reason(mt.RunSpec("bert-base", "full", 1, 1024, False), everything, "cuda") or "")


def test_device_names_map_to_catalog_gpus(mt: ModuleType) -> None:
    assert mt.gpu_from_device_name("NVIDIA H100 80GB HBM3") == "H100"
    assert mt.gpu_from_device_name("NVIDIA A100-SXM4-80GB") == "A100-80GB"
    assert mt.gpu_from_device_name("NVIDIA H200") == "H200"
    assert mt.gpu_from_device_name("NVIDIA GeForce RTX 4090") == "RTX4090"
    assert mt.gpu_from_device_name("Imaginary Accelerator 9000") is None


def _reference_keys(reference_dir: Path) -> set[tuple[str, ...]]:
    lines = (reference_dir / "measurement_cases.jsonl").read_text(encoding="utf-8").splitlines()
    return {tuple(json.loads(line)) for line in lines if line.strip()}


def test_row_layout_matches_the_reference_rows(mt: ModuleType, reference_dir: Path, tmp_path: Path) -> None:
    spec = mt.RunSpec("llama-3.2-1b", "lora", 4, 1024, True)
    measured = mt.Measured(12.5, 14.0, 21000.0, 2, 5, 0.98, 1_235_814_400)
    prediction = mt.predict(spec, "H200")
    row = mt.build_row(spec, _env(mt), measured, prediction)
    assert _reference_keys(reference_dir) == {tuple(row)}
    assert set(row["measured"]) == {"peak_vram_gb", "tokens_per_second"}
    assert set(row["request"]) == {"workload", "gpu", "gpu_count"}
    assert row["measured"] == {"peak_vram_gb": 12.5, "tokens_per_second": 21000.0}
    assert (row["kind"], row["vram_kind"], row["request"]["gpu"]) == ("measurement", "peak", "H200")
    assert row["source"] == "bench/measure_training.py on NVIDIA H200, torch 2.13.0, transformers 5.24.0, 2026-11-30"
    assert "max_memory_allocated" in row["assumptions"] and "14.000 GB" in row["assumptions"]
    workload = Workload.model_validate(row["request"]["workload"])
    assert (workload.method, workload.micro_batch_size, workload.gradient_checkpointing) == ("lora", 4, True)
    # The accuracy bench reads the row as an allocator-peak measurement of that workload.
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (case,) = _load("estimator_accuracy").load_cases((path,))
    assert (case.vram_gb, case.vram_kind, case.allocated_only, case.gpu) == (12.5, "peak", True, "H200")


def test_oom_row_keeps_the_prediction(mt: ModuleType) -> None:
    spec = mt.RunSpec("llama-3-8b", "full", 8, 4096, False)
    prediction = mt.predict(spec, "H100")
    assert not prediction.fits  # 8B full fine-tuning in AMP does not fit 80 GB
    row = mt.build_row(spec, _env(mt), None, prediction)
    assert row["vram_kind"] == "oom"
    assert row["measured"] == {"peak_vram_gb": None, "tokens_per_second": None}
    assert f"{prediction.total_gb:.2f} GB" in row["assumptions"]
    assert "OOM" in mt.comparison_line(spec, None, prediction)


def test_cpu_rows_are_not_gpu_measurements(mt: ModuleType) -> None:
    spec = mt.RunSpec(mt.TINY_MODEL, "full", 2, 64, False)
    row = mt.build_row(spec, _env(mt, "cpu"), mt.Measured(None, None, 9000.0, 2, 5, 0.1, 106_816), None)
    assert (row["kind"], row["request"]["gpu"], row["measured"]["peak_vram_gb"]) == ("plumbing", "cpu", None)
    assert "not a measurement of any GPU" in row["assumptions"]


def test_comparison_line_reports_percent_errors(mt: ModuleType) -> None:
    spec = mt.RunSpec("gpt2", "full", 4, 1024, False)
    prediction = mt.Prediction("H100", total_gb=11.0, allocated_gb=10.0, tokens_per_second=60000.0, fits=True)
    line = mt.comparison_line(spec, mt.Measured(8.0, 9.0, 50000.0, 2, 5, 0.4), prediction)
    assert "+25.0%" in line  # allocated 10 predicted vs 8 measured
    assert "+20.0%" in line  # tokens/s 60k predicted vs 50k measured


def test_no_cuda_exits_2(mt: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    code = mt.main(["--out", str(out)], probe=lambda: (False, "torch is not importable"))
    assert code == mt.EXIT_NO_CUDA == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not out.exists()


def test_cpu_without_tiny_is_refused(mt: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert mt.main(["--device", "cpu"]) == 2
    assert "--tiny" in capsys.readouterr().err


def test_list_prints_predictions_without_torch(mt: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert mt.main(["--list", "--models", "gpt2", "--micro-batch", "1", "--grad-ckpt", "off", "--gpu", "A100"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("B-A100-gpt2-full-") and "pred alloc" in out[0]


def test_no_torch_exits_2_with_the_real_probe(mt: ModuleType, capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch is installed with the probe extra; None in sys.modules makes it unimportable here.
    monkeypatch.setitem(sys.modules, "torch", None)
    assert mt.main(["--out", str(tmp_path / "rows.jsonl")]) == 2
    assert "torch is not importable" in capsys.readouterr().err
    assert mt.main(["--device", "cpu", "--tiny", "--out", str(tmp_path / "rows.jsonl")]) == 2


def test_run_grid_writes_rows_records_oom_and_skips(
    mt: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    fits = mt.RunSpec("llama-3.2-1b", "lora", 1, 1024, False)
    too_big = mt.RunSpec("llama-3-8b", "full", 8, 4096, False)
    qlora = mt.RunSpec("llama-3-8b", "qlora", 1, 1024, False)

    def fake_measure(spec: object, device: str, warmup: int, steps: int) -> object:
        if spec == too_big:
            raise RuntimeError("CUDA out of memory. Tried to allocate 3.91 GiB")
        return mt.Measured(5.0, 5.5, 20000.0, warmup, steps, 0.2, 1_235_814_400)

    monkeypatch.setattr(mt, "measure", fake_measure)
    out = tmp_path / "rows.jsonl"
    libs = frozenset({"torch", "transformers", "peft"})  # no bitsandbytes
    failed = mt.run_grid([fits, too_big, qlora], _env(mt), out, 2, 5, "H200", libs)
    assert failed == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["vram_kind"]) for r in rows] == [(fits.run_id("H200"), "peak"), (too_big.run_id("H200"), "oom")]
    printed = capsys.readouterr().out
    assert f"SKIP {qlora.run_id('H200')}: qlora needs bitsandbytes" in printed
    first = printed.splitlines()[0]
    pred = mt.predict(fits, "H200")
    assert f"alloc 5.00 GB vs pred {pred.allocated_gb:.2f} ({mt.pct(pred.allocated_gb, 5.0):+.1f}%)" in first
    assert "OOM" in printed


def test_other_failures_are_counted_not_recorded(
    mt: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    def broken(spec: object, device: str, warmup: int, steps: int) -> object:
        raise ValueError("target modules not found")

    monkeypatch.setattr(mt, "measure", broken)
    out = tmp_path / "rows.jsonl"
    libs = frozenset({"torch", "transformers", "peft"})
    assert mt.run_grid([mt.RunSpec("gpt2", "lora", 1, 512, False)], _env(mt), out, 1, 1, "H200", libs) == 1
    assert out.read_text(encoding="utf-8") == ""
