from __future__ import annotations

import pytest
from pydantic import ValidationError

from optimizer.estimator.workload import Constraints, HfConfigSpec, ModelDims, Workload


def test_contract_example_parses() -> None:
    w = Workload.model_validate(
        {
            "model": "llama-3-8b", "method": "qlora", "precision": "bf16", "optimizer": "adamw",
            "micro_batch_size": 4, "seq_len": 2048, "gradient_checkpointing": True, "sharding": "auto",
            "lora_rank": 16, "tokens": 100000000,
        }
    )
    assert w.total_tokens == 1e8
    assert w.model == "llama-3-8b"


def test_defaults_follow_contract() -> None:
    w = Workload(model="bert-base")
    # CONTRACT v3: precision defaults to "auto" (bf16, or fp16 on Volta/Turing, chosen per GPU).
    assert (w.method, w.precision, w.optimizer) == ("full", "auto", "adamw")
    assert (w.micro_batch_size, w.seq_len, w.gradient_checkpointing, w.sharding, w.lora_rank) == (
        "auto", 512, "auto", "auto", 16,
    )
    assert w.global_batch_size == 16 and w.gradient_accumulation_steps is None


def test_amount_of_training_forms() -> None:
    assert Workload(model="gpt2", samples=1000, seq_len=256).total_tokens == 256_000
    assert Workload(model="gpt2", dataset_tokens=1e6, epochs=3).total_tokens == 3e6
    with pytest.raises(ValidationError, match="only one of"):
        Workload(model="gpt2", tokens=1e6, samples=10)
    with pytest.raises(ValidationError, match="epochs needs dataset_tokens"):
        Workload(model="gpt2", tokens=1e6, epochs=2)


def test_model_forms() -> None:
    assert isinstance(Workload.model_validate({"model": {"params_b": 1.3}}).model, ModelDims)
    w = Workload.model_validate({"model": {"hf_config": {"model_type": "llama"}}})
    assert isinstance(w.model, HfConfigSpec)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tokens", 1e30),
        ("tokens", 0),
        ("tokens", -5),
        ("micro_batch_size", 0),
        ("seq_len", -1),
        ("lora_rank", 0),
        ("method", "dora"),
        ("precision", "fp8"),
        ("sharding", "zero4"),
    ],
)
def test_bad_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as err:
        Workload.model_validate({"model": "gpt2", field: value})
    assert err.value.errors()[0]["loc"][0] == field


def test_unknown_fields_rejected() -> None:
    with pytest.raises(ValidationError):
        Workload.model_validate({"model": "gpt2", "batch": 4})
    with pytest.raises(ValidationError):
        Constraints.model_validate({"deadline": 3})


def test_samples_times_seq_len_capped() -> None:
    with pytest.raises(ValidationError, match="exceeds"):
        Workload(model="gpt2", samples=1e13, seq_len=100_000)
