"""Model presets, parameter counts from dimensions, config.json parsing, LoRA parameter counts."""

from __future__ import annotations

import pytest

from optimizer.errors import UnknownModel, UnsupportedConfig
from optimizer.estimator.shapes import (
    list_presets,
    lora_trainable_params,
    model_from_hf_config,
    preset_names,
    resolve_model,
)
from optimizer.estimator.workload import HfConfigSpec, ModelDims

# Parameter counts published on each model's hub page / by transformers' num_parameters().
PUBLISHED_PARAMS = {
    "llama-3-8b": 8_030_261_248,  # CONTRACT example; meta-llama/Meta-Llama-3-8B
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-7b": 7_615_616_512,
    "gpt2": 124_439_808,
    "bert-base": 109_482_240,
    "bert-large": 335_141_888,
    "distilbert": 66_362_880,
    "roberta-base": 124_645_632,
    "t5-base": 222_903_552,
    "pythia-1b": 1_011_781_632,
    "pythia-6.9b": 6_857_302_016,
    "opt-1.3b": 1_315_758_080,
    "phi-2": 2_779_683_840,
    "gemma-2b": 2_506_172_416,
    "llama-3.2-1b": 1_235_814_400,
    "tinyllama-1.1b": 1_100_048_384,
}

CONTRACT_PRESETS = [
    "bert-base", "distilbert", "tinybert", "roberta-base", "gpt2", "llama-2-7b", "llama-3-8b",
    "mistral-7b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b",
]

# config.json fields as published on the hub (only what the parser reads, plus model_type).
HF_CONFIGS = {
    "llama-3-8b": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                   "vocab_size": 128256, "tie_word_embeddings": False},
    "mistral-7b": {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                   "vocab_size": 32000, "tie_word_embeddings": False},
    "qwen2.5-0.5b": {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
                     "vocab_size": 151936, "tie_word_embeddings": True},
    "gemma-2b": {"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18,
                 "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
                 "intermediate_size": 16384, "vocab_size": 256000},
    "phi-2": {"model_type": "phi", "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32,
              "intermediate_size": 10240, "vocab_size": 51200, "tie_word_embeddings": False},
    "gpt2": {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
             "vocab_size": 50257, "n_positions": 1024},
    "pythia-1b": {"model_type": "gpt_neox", "hidden_size": 2048, "num_hidden_layers": 16,
                  "num_attention_heads": 8, "intermediate_size": 8192, "vocab_size": 50304,
                  "tie_word_embeddings": False},
    "opt-1.3b": {"model_type": "opt", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32,
                 "ffn_dim": 8192, "vocab_size": 50272, "max_position_embeddings": 2048,
                 "word_embed_proj_dim": 2048},
    "bert-base": {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                  "intermediate_size": 3072, "vocab_size": 30522, "max_position_embeddings": 512,
                  "type_vocab_size": 2},
    "roberta-base": {"model_type": "roberta", "hidden_size": 768, "num_hidden_layers": 12,
                     "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50265,
                     "max_position_embeddings": 514, "type_vocab_size": 1},
    "distilbert": {"model_type": "distilbert", "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072,
                   "vocab_size": 30522, "max_position_embeddings": 512},
    "t5-base": {"model_type": "t5", "d_model": 768, "d_ff": 3072, "d_kv": 64, "num_layers": 12,
                "num_decoder_layers": 12, "num_heads": 12, "vocab_size": 32128, "feed_forward_proj": "relu",
                "relative_attention_num_buckets": 32},
}


@pytest.mark.parametrize(("name", "expected"), PUBLISHED_PARAMS.items())
def test_preset_param_count_matches_published(name: str, expected: int) -> None:
    assert resolve_model(name).params == expected


def test_contract_presets_present_and_listed() -> None:
    names = preset_names()
    for name in CONTRACT_PRESETS:
        assert name in names
    rows = {r["name"]: r for r in list_presets()}
    assert set(rows) == set(names)
    assert {"name", "params", "layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "arch",
            "source"} <= set(rows["llama-3-8b"])
    assert rows["llama-3-8b"]["kv_heads"] == 8
    assert rows["bert-base"]["arch"] == "encoder"
    assert rows["t5-base"]["arch"] == "encoder-decoder"
    assert all(r["source"].startswith("https://huggingface.co/") for r in rows.values())


@pytest.mark.parametrize("name", HF_CONFIGS)
def test_hf_config_gives_same_count_as_preset(name: str) -> None:
    shape = model_from_hf_config(HF_CONFIGS[name])
    assert shape.params == resolve_model(name).params
    assert shape.arch == resolve_model(name).arch


def test_hf_config_sizes_written_as_whole_floats_read_as_ints() -> None:
    """``2048.0`` or ``256.0`` (a config written by a tool that keeps numbers as floats) is read as the
    integer it is, head_dim too; compiled (``optimizer.native``), a float where the shape holds an int
    would raise instead."""
    cfg = HF_CONFIGS["gemma-2b"]
    floats = {**cfg, "hidden_size": 2048.0, "head_dim": 256.0}
    shape, want = model_from_hf_config(floats), model_from_hf_config(cfg)
    assert shape == want and type(shape.head_dim) is int and shape.params == want.params


def test_hf_config_via_resolve_model() -> None:
    shape = resolve_model(HfConfigSpec(hf_config=HF_CONFIGS["llama-3-8b"]))
    assert shape.params == 8_030_261_248 and shape.gated_mlp and shape.kv_heads == 8


def test_hf_config_unknown_type_names_field_and_supported_types() -> None:
    with pytest.raises(UnsupportedConfig) as err:
        model_from_hf_config({"model_type": "mamba", "hidden_size": 768})
    assert err.value.field == "workload.model.hf_config"
    assert "mamba" in err.value.reason and "llama" in err.value.reason


def test_hf_config_missing_field_is_named() -> None:
    cfg = dict(HF_CONFIGS["mistral-7b"])
    del cfg["intermediate_size"]
    with pytest.raises(UnsupportedConfig) as err:
        model_from_hf_config(cfg)
    assert "intermediate_size" in err.value.reason


def test_hf_config_without_model_type() -> None:
    with pytest.raises(UnsupportedConfig, match="model_type"):
        model_from_hf_config({"hidden_size": 10})


@pytest.mark.parametrize(
    "spec", ["LLAMA-3-8B", "meta-llama/Meta-Llama-3-8B", " llama-3-8b ", "Llama3-8B", "meta-llama/Meta-Llama-3-8B-Instruct"]
)
def test_preset_names_tolerant(spec: str) -> None:
    assert resolve_model(spec).name == "llama-3-8b"


def test_chat_checkpoint_resolves_to_base_shape() -> None:
    assert resolve_model("meta-llama/Llama-2-7b-chat-hf").name == "llama-2-7b"
    assert resolve_model("Qwen/Qwen2.5-7B-Instruct").name == "qwen2.5-7b"


def test_unknown_model_suggests() -> None:
    with pytest.raises(UnknownModel) as err:
        resolve_model("lama-3-8b")
    assert err.value.field == "workload.model"
    assert "did you mean" in err.value.reason and "llama-3-8b" in err.value.reason


def test_explicit_dims_keep_params_and_detect_gated_mlp() -> None:
    # Llama-1 7B dimensions: the gated variant reproduces 6.74B, the plain one would give ~5B.
    shape = resolve_model(ModelDims(params_b=6.74, layers=32, hidden=4096, heads=32, intermediate=11008, vocab=32000))
    assert shape.params == 6_740_000_000
    assert shape.gated_mlp


def test_explicit_dims_of_a_preset_take_its_architecture() -> None:
    shape = resolve_model(ModelDims(params_b=0.335, layers=24, hidden=1024, heads=16, intermediate=4096, vocab=30522))
    assert shape.arch == "encoder" and shape.dropout


def test_params_only_gets_plausible_shape() -> None:
    shape = resolve_model(ModelDims(params_b=7.0))
    assert 3500 <= shape.hidden <= 4700 and 28 <= shape.layers <= 40


@pytest.mark.parametrize(
    ("model", "dims", "expected"),
    [
        # Trainable-parameter column of the lit-gpt resource table (LoRA r=8 on query and value).
        ("llama-2-7b", None, 4_194_304),
        ("llama-2-13b", None, 6_553_600),
        (None, dict(params_b=1.42, layers=24, hidden=2048, heads=32, intermediate=8192, vocab=51200), 1_572_864),
        (None, dict(params_b=3.64, layers=16, hidden=4096, heads=32, intermediate=16384, vocab=50688), 2_097_152),
    ],
)
def test_lora_params_match_published(model: str | None, dims: dict | None, expected: int) -> None:
    shape = resolve_model(model) if model else resolve_model(ModelDims(**dims))  # type: ignore[arg-type]
    assert lora_trainable_params(shape, 8, "qv") == expected


def test_lora_targets_and_gqa() -> None:
    shape = resolve_model("llama-3-8b")
    attn = lora_trainable_params(shape, 16, "attention")
    # q and o are 4096x4096, k and v 4096x1024 under grouped-query attention.
    assert attn == 32 * 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)
    every = lora_trainable_params(shape, 16, "all-linear")
    assert every == attn + 32 * 16 * 3 * (4096 + 14336)
    assert lora_trainable_params(shape, 32, "attention") == 2 * attn


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        ({"model_type": "llama", "hidden_size": -5, "num_hidden_layers": 2, "num_attention_heads": 1,
          "vocab_size": 10, "intermediate_size": 4}, "hidden must be a positive integer"),
        ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 3,
          "vocab_size": 10, "intermediate_size": 4}, "not divisible by 3 heads"),
        ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 3, "vocab_size": 10, "intermediate_size": 4}, "not divisible by 3 kv heads"),
        ({"model_type": "gpt2", "n_embd": "wide", "n_layer": 2, "n_head": 2, "vocab_size": 10}, "cannot read"),
    ],
)
def test_impossible_configs_are_rejected(cfg: dict[str, object], needle: str) -> None:
    with pytest.raises(UnsupportedConfig) as err:
        model_from_hf_config(cfg)
    assert needle in err.value.reason
    assert err.value.field == "workload.model.hf_config"


def test_explicit_dims_must_be_a_transformer() -> None:
    from optimizer.estimator.workload import ModelDims

    with pytest.raises(UnsupportedConfig, match="not divisible"):
        resolve_model(ModelDims(params_b=1.3, layers=24, hidden=2048, heads=24))
