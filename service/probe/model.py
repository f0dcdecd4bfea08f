"""Building the model of a workload from its shape, with random weights (no download).

The memory and speed of a training step do not depend on the weights' values, so a model built
with transformers' ``from_config`` from the workload's dimensions trains like the real checkpoint.
Full fine-tuning, LoRA (PEFT) and QLoRA (bitsandbytes NF4 block linears + PEFT adapters), with
checkpointing. Shared by ``gpucost probe`` and ``bench/measure_training.py``.

The config mapping is pure; ``build_model`` imports torch, transformers, peft and bitsandbytes
only when called.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import Any

from optimizer.estimator.shapes import ModelShape

# Hugging Face model_type per preset family, by name prefix (longest prefix first).
_FAMILIES = (
    ("tinyllama", "llama"), ("tiny-llama", "llama"), ("llama", "llama"), ("mistral", "mistral"),
    ("qwen", "qwen2"), ("gemma", "gemma"), ("gpt2", "gpt2"), ("pythia", "gpt_neox"), ("opt", "opt"),
    ("phi", "phi"), ("distilbert", "distilbert"), ("tinybert", "bert"), ("roberta", "roberta"),
    ("bert", "bert"), ("t5", "t5"),
)
_LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma")

# Module-name suffixes PEFT adapts, per family: (attention matrices, MLP matrices).
_LORA_MODULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "llama": (("q_proj", "k_proj", "v_proj", "o_proj"), ("gate_proj", "up_proj", "down_proj")),
    "gpt2": (("c_attn", "attn.c_proj"), ("c_fc", "mlp.c_proj")),
    "gpt_neox": (("query_key_value", "attention.dense"), ("dense_h_to_4h", "dense_4h_to_h")),
    "opt": (("q_proj", "k_proj", "v_proj", "out_proj"), ("fc1", "fc2")),
    "phi": (("q_proj", "k_proj", "v_proj", "dense"), ("fc1", "fc2")),
    "bert": (("query", "key", "value", "attention.output.dense"), ("intermediate.dense", "output.dense")),
    "distilbert": (("q_lin", "k_lin", "v_lin", "out_lin"), ("lin1", "lin2")),
}
for _mt in ("mistral", "qwen2", "gemma"):
    _LORA_MODULES[_mt] = _LORA_MODULES["llama"]
_LORA_MODULES["roberta"] = _LORA_MODULES["bert"]

PROBE_LIBS = ("torch", "transformers", "peft", "bitsandbytes")


def family(shape: ModelShape) -> str:
    """The Hugging Face ``model_type`` that builds a model of this shape."""
    name = shape.name.lower()
    for prefix, mt in _FAMILIES:
        if name.startswith(prefix):
            return mt
    if shape.arch == "encoder":
        return "bert"
    return "llama" if shape.gated_mlp else "gpt2"


def hf_config_dict(shape: ModelShape) -> dict[str, Any]:
    """``config.json`` fields (with ``model_type``) of a transformers model with ``shape``'s
    dimensions. Raises ValueError for shapes that are not built (encoder-decoders, vision)."""
    mt = family(shape)
    h, layers, heads, inter, vocab = shape.hidden, shape.layers, shape.heads, shape.intermediate, shape.vocab
    if mt in _LLAMA_LIKE:
        cfg: dict[str, Any] = dict(
            hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=shape.kv_heads, intermediate_size=inter, vocab_size=vocab,
            tie_word_embeddings=shape.tied_embeddings, max_position_embeddings=131072,
        )
        if shape.head_dim:
            cfg["head_dim"] = shape.head_dim
    elif mt == "gpt2":
        cfg = dict(n_embd=h, n_layer=layers, n_head=heads, n_inner=inter, vocab_size=vocab,
                   n_positions=shape.max_positions or 1024, tie_word_embeddings=True)
    elif mt == "gpt_neox":
        cfg = dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                   intermediate_size=inter, vocab_size=vocab, tie_word_embeddings=shape.tied_embeddings,
                   max_position_embeddings=8192)
    elif mt == "opt":
        cfg = dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, ffn_dim=inter,
                   vocab_size=vocab, word_embed_proj_dim=h,
                   max_position_embeddings=max(shape.max_positions - 2, 2048))
    elif mt == "phi":
        cfg = dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                   num_key_value_heads=shape.kv_heads, intermediate_size=inter, vocab_size=vocab,
                   tie_word_embeddings=False, max_position_embeddings=8192)
    elif mt in ("bert", "roberta"):
        cfg = dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                   intermediate_size=inter, vocab_size=vocab,
                   max_position_embeddings=shape.max_positions or 512,
                   type_vocab_size=2 if mt == "bert" else 1)
    elif mt == "distilbert":
        cfg = dict(dim=h, n_layers=layers, n_heads=heads, hidden_dim=inter, vocab_size=vocab,
                   max_position_embeddings=shape.max_positions or 512)
    else:
        raise ValueError(f"{shape.name}: {shape.arch} models ({mt}) are not built by the probe")
    if shape.is_vision:
        raise ValueError(f"{shape.name}: vision models are not built by the probe")
    return {"model_type": mt, **cfg}


def max_trainable_seq(shape: ModelShape) -> int | None:
    """Longest sequence a model with learned position embeddings accepts (None: rotary)."""
    if family(shape) in ("opt", "roberta"):
        return shape.max_positions - 2  # two reserved padding positions
    return shape.max_positions or None


def lora_target_modules(mt: str, targets: str) -> list[str]:
    attn, mlp = _LORA_MODULES[mt]
    return list(attn + mlp) if targets == "all-linear" else list(attn)


def importable(names: Iterable[str] = PROBE_LIBS) -> frozenset[str]:
    return frozenset(n for n in names if importlib.util.find_spec(n) is not None)


# --- the torch side: imported only here ---------------------------------------------------------


def build_model(
    shape: ModelShape, *, method: str, precision: str, checkpointing: bool, device: str,
    lora_rank: int = 16, lora_targets: str = "attention",
) -> tuple[Any, int]:
    """The model ready to train on ``device``, and its parameter count as built (before
    quantization and adapters)."""
    import torch
    import transformers

    cfg = hf_config_dict(shape)
    mt = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(mt, **cfg)
    config.use_cache = False
    if method == "full":
        dtype = torch.bfloat16 if precision == "bf16-true" else torch.float32
    else:
        dtype = torch.float32 if precision == "fp32" else torch.bfloat16
    encoder = shape.arch == "encoder"
    auto = transformers.AutoModelForSequenceClassification if encoder else transformers.AutoModelForCausalLM
    if encoder:
        config.num_labels = 2
    # transformers 5 renamed torch_dtype to dtype.
    dtype_kw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    # Initialise on the device: random init of an 8B model on the host takes minutes.
    with torch.device(device):
        model = auto.from_config(config, attn_implementation="sdpa", **{dtype_kw: dtype})
    built = sum(p.numel() for p in model.parameters())
    if method == "qlora":
        quantize_linears(model, device)
    if checkpointing:
        enable_checkpointing(model)
    if method == "full":
        return model, built
    import peft

    lora = peft.LoraConfig(
        r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0,
        target_modules=lora_target_modules(mt, lora_targets),
        task_type=peft.TaskType.SEQ_CLS if encoder else peft.TaskType.CAUSAL_LM,
    )
    model = peft.get_peft_model(model, lora)
    if precision == "bf16-true":
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.to(torch.bfloat16)
    return model, built


def enable_checkpointing(model: Any) -> None:
    # Non-reentrant: frozen embeddings (LoRA) then need no input-gradient hook.
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def quantize_linears(model: Any, device: str) -> None:
    """Swap every block nn.Linear for a bitsandbytes NF4 Linear4bit (the heads stay 16-bit, as
    transformers' ``load_in_4bit`` leaves them)."""
    import bitsandbytes as bnb
    import torch

    keep = ("lm_head", "score", "classifier")
    names = [name for name, mod in model.named_modules()
             if isinstance(mod, torch.nn.Linear) and name.split(".")[-1] not in keep]
    for name in names:
        lin = model.get_submodule(name)
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        q = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None,
                              compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4",
                              device="meta")
        q.weight = bnb.nn.Params4bit(lin.weight.data, requires_grad=False, compress_statistics=True,
                                     quant_type="nf4")
        if lin.bias is not None:
            q.bias = torch.nn.Parameter(lin.bias.data, requires_grad=False)
        setattr(parent, name.rsplit(".", 1)[-1], q.to(device))  # .to quantizes the weight
    for p in model.parameters():
        p.requires_grad_(False)


def make_optimizer(name: str, params: list[Any]) -> Any:
    import torch

    if name == "adamw_8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=1e-5)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-5)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-5, relative_step=False, scale_parameter=False)
    return torch.optim.AdamW(params, lr=1e-5)


def is_oom(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, or an allocator failure raised as a plain RuntimeError
    (bitsandbytes, cuBLAS workspaces)."""
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


def train_step(model: Any, batch: dict[str, Any], opt: Any, precision: str, device_kind: str) -> Any:
    """One optimizer step as the recipe runs it: autocast for bf16/fp16 (fp16 with a loss scaler),
    backward, step, gradients cleared. Returns a callable so the timing loop stays free of set-up."""
    import contextlib

    import torch

    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def step() -> None:
        ctx = (torch.autocast(device_type=device_kind, dtype=autocast_dtype) if autocast_dtype is not None
               else contextlib.nullcontext())
        with ctx:
            loss = model(**batch).loss
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    return step
