"""Model shapes: presets, parameter counts from dimensions, Hugging Face ``config.json`` parsing.

A ``ModelShape`` holds what the estimators need: the transformer's dimensions and its exact
parameter count. Parameter counts are computed from the dimensions (embeddings, attention with
grouped-query ``kv_heads``, plain or gated MLP, norms, biases, tied or untied output head), so a
preset and the same model's ``config.json`` give the same number.

Preset dimensions are copied from each model's public ``config.json`` on the Hugging Face hub
(URL in ``source``, read 2026-11).
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from optimizer.errors import UnknownModel, UnsupportedConfig
from optimizer.estimator import vision
from optimizer.estimator.hf_limits import MAX_PARAMS
from optimizer.estimator.workload import HfConfigSpec, ModelDims

# cnn and vit are image classifiers (optimizer.estimator.vision prices them).
Arch = Literal["decoder", "encoder", "encoder-decoder", "cnn", "vit"]
HF_FIELD = "workload.model.hf_config"


@dataclass(frozen=True, slots=True)
class ModelShape:
    name: str
    arch: Arch
    params: int
    layers: int  # all transformer blocks (encoder + decoder for encoder-decoder models)
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    gated_mlp: bool = False
    tied_embeddings: bool = False
    has_bias: bool = False
    head_dim: int | None = None
    max_positions: int = 0  # learned position embeddings (0: rotary / relative)
    encoder_layers: int = 0
    decoder_layers: int = 0
    dropout: bool = False  # hidden/attention dropout active in training (BERT-era models)
    source: str = ""
    # Image models: ResNet stage depths, ViT patch size, the pretraining resolution, classes.
    depths: tuple[int, ...] = ()
    patch_size: int = 0
    image_size: int = 0
    num_classes: int = 0
    # Derived widths, fixed at construction: the estimator reads them thousands of times a quote.
    attn_head_dim: int = field(init=False, repr=False, compare=False)
    q_dim: int = field(init=False, repr=False, compare=False)
    kv_dim: int = field(init=False, repr=False, compare=False)
    _linear_params: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        head = self.head_dim or self.hidden // self.heads
        object.__setattr__(self, "attn_head_dim", head)
        object.__setattr__(self, "q_dim", self.heads * head)
        object.__setattr__(self, "kv_dim", self.kv_heads * head)
        # A CNN's weights are all convolutions: every one is "linear" (sharded, gathered per block).
        linear = self.params if self.arch == "cnn" else self.layers * _block_linear_params(self)
        object.__setattr__(self, "_linear_params", linear)

    @property
    def is_vision(self) -> bool:
        return self.arch in ("cnn", "vit")

    @property
    def embedding_params(self) -> int:
        """Input lookup tables (token and learned positions): they cost no matmul FLOPs."""
        return self.vocab * self.hidden + self.max_positions * self.hidden

    @property
    def lm_head(self) -> bool:
        """Whether training computes vocabulary logits.

        Encoders are fine-tuned with small task heads (classification, span extraction), so no
        ``tokens x vocab`` logits are formed; decoders and encoder-decoders predict tokens.
        """
        return self.arch in ("decoder", "encoder-decoder")

    @property
    def matmul_params(self) -> int:
        """Parameters that take part in a matmul per token (the LM head counts even when tied)."""
        if self.is_vision:
            # Patch embedding, blocks and head are all matmuls; only positions and the class token are not.
            return self.params - (self.max_positions + 1) * self.hidden
        head = self.vocab * self.hidden if (self.lm_head and self.tied_embeddings) else 0
        return self.params - self.embedding_params + head

    @property
    def linear_layer_params(self) -> int:
        """Weights of the per-block linear layers: what 4-bit quantization and LoRA act on."""
        return self._linear_params

    def public(self) -> dict[str, Any]:
        if self.is_vision:
            return {
                "name": self.name, "arch": self.arch, "params": self.params, "layers": self.layers,
                "hidden": self.hidden, "heads": self.heads, "depths": list(self.depths),
                "patch_size": self.patch_size, "image_size": self.image_size,
                "num_classes": self.num_classes, "source": self.source,
            }
        return {
            "name": self.name,
            "arch": self.arch,
            "params": self.params,
            "layers": self.layers,
            "hidden": self.hidden,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "intermediate": self.intermediate,
            "vocab": self.vocab,
            "gated_mlp": self.gated_mlp,
            "tied_embeddings": self.tied_embeddings,
            "source": self.source,
        }


def _block_linear_params(s: ModelShape) -> int:
    """Linear weights of one self-attention block (no biases, norms)."""
    attn = s.hidden * (2 * s.q_dim + 2 * s.kv_dim)
    mlp = (3 if s.gated_mlp else 2) * s.hidden * s.intermediate
    return attn + mlp


def count_params(s: ModelShape) -> int:
    """Exact parameter count of a standard transformer with the shape's dimensions."""
    h, i = s.hidden, s.intermediate
    norm = (2 if s.has_bias else 1) * h  # LayerNorm has a bias, RMSNorm does not
    attn = h * (2 * s.q_dim + 2 * s.kv_dim)
    attn_bias = (s.q_dim + 2 * s.kv_dim + h) if s.has_bias else 0
    mlp = (3 if s.gated_mlp else 2) * h * i
    mlp_bias = ((2 * i if s.gated_mlp else i) + h) if s.has_bias else 0
    block = attn + attn_bias + mlp + mlp_bias + 2 * norm
    embed = s.vocab * h + s.max_positions * h
    # Encoders are counted without an MLM decoder: fine-tuning puts a small task head there.
    head = 0 if (s.tied_embeddings or s.arch == "encoder") else s.vocab * h
    if s.arch == "encoder-decoder":
        # Decoder blocks add cross-attention and a third norm.
        cross = attn + attn_bias + norm
        total = s.encoder_layers * block + s.decoder_layers * (block + cross)
        return total + embed + head + 2 * norm
    return s.layers * block + embed + head + norm


def _shape(**kw: Any) -> ModelShape:
    kw.setdefault("kv_heads", kw["heads"])
    if kw.get("arch") == "encoder":
        kw["tied_embeddings"] = True  # the MLM decoder reuses the word embeddings
    shape = ModelShape(params=0, **kw)
    return replace(shape, params=count_params(shape))


_HF = "https://huggingface.co/{}/blob/main/config.json"

# name -> (shape, extra params the generic count leaves out, aliases)
# The extras are exact: BERT token-type embeddings and pooler, T5 relative-attention buckets,
# Phi's LM-head bias and single LayerNorm per block.
_PRESET_SPECS: list[tuple[dict[str, Any], int, tuple[str, ...]]] = [
    (dict(name="bert-base", arch="encoder", layers=12, hidden=768, heads=12, intermediate=3072,
          vocab=30522, has_bias=True, max_positions=512, dropout=True,
          source=_HF.format("google-bert/bert-base-uncased")),
     2 * 768 + 768 * 768 + 768, ("bert-base-uncased", "bert-base-cased", "google-bert/bert-base-uncased")),
    (dict(name="bert-large", arch="encoder", layers=24, hidden=1024, heads=16, intermediate=4096,
          vocab=30522, has_bias=True, max_positions=512, dropout=True,
          source=_HF.format("google-bert/bert-large-uncased")),
     2 * 1024 + 1024 * 1024 + 1024, ("bert-large-uncased", "google-bert/bert-large-uncased")),
    (dict(name="distilbert", arch="encoder", layers=6, hidden=768, heads=12, intermediate=3072,
          vocab=30522, has_bias=True, max_positions=512, dropout=True,
          source=_HF.format("distilbert/distilbert-base-uncased")),
     0, ("distilbert-base-uncased", "distilbert-base")),
    (dict(name="tinybert", arch="encoder", layers=4, hidden=312, heads=12, intermediate=1200,
          vocab=30522, has_bias=True, max_positions=512, dropout=True,
          source=_HF.format("huawei-noah/TinyBERT_General_4L_312D")),
     2 * 312 + 312 * 312 + 312, ("tinybert-4l-312d", "huawei-noah/tinybert_general_4l_312d")),
    (dict(name="roberta-base", arch="encoder", layers=12, hidden=768, heads=12, intermediate=3072,
          vocab=50265, has_bias=True, max_positions=514, dropout=True,
          source=_HF.format("FacebookAI/roberta-base")),
     768 + 768 * 768 + 768, ("facebookai/roberta-base",)),
    (dict(name="roberta-large", arch="encoder", layers=24, hidden=1024, heads=16, intermediate=4096,
          vocab=50265, has_bias=True, max_positions=514, dropout=True,
          source=_HF.format("FacebookAI/roberta-large")),
     1024 + 1024 * 1024 + 1024, ("facebookai/roberta-large",)),
    (dict(name="t5-base", arch="encoder-decoder", layers=24, encoder_layers=12, decoder_layers=12,
          hidden=768, heads=12, intermediate=3072, vocab=32128, tied_embeddings=True, dropout=True,
          source=_HF.format("google-t5/t5-base")),
     2 * 32 * 12, ("google-t5/t5-base",)),
    (dict(name="gpt2", arch="decoder", layers=12, hidden=768, heads=12, intermediate=3072,
          vocab=50257, has_bias=True, tied_embeddings=True, max_positions=1024, dropout=True,
          source=_HF.format("openai-community/gpt2")),
     0, ("gpt2-small", "openai-community/gpt2")),
    (dict(name="gpt2-medium", arch="decoder", layers=24, hidden=1024, heads=16, intermediate=4096,
          vocab=50257, has_bias=True, tied_embeddings=True, max_positions=1024, dropout=True,
          source=_HF.format("openai-community/gpt2-medium")),
     0, ("openai-community/gpt2-medium",)),
    (dict(name="opt-1.3b", arch="decoder", layers=24, hidden=2048, heads=32, intermediate=8192,
          vocab=50272, has_bias=True, tied_embeddings=True, max_positions=2050, dropout=True,
          source=_HF.format("facebook/opt-1.3b")),
     0, ("facebook/opt-1.3b",)),
    (dict(name="pythia-1b", arch="decoder", layers=16, hidden=2048, heads=8, intermediate=8192,
          vocab=50304, has_bias=True, source=_HF.format("EleutherAI/pythia-1b")),
     0, ("eleutherai/pythia-1b",)),
    (dict(name="pythia-6.9b", arch="decoder", layers=32, hidden=4096, heads=32, intermediate=16384,
          vocab=50432, has_bias=True, source=_HF.format("EleutherAI/pythia-6.9b")),
     0, ("eleutherai/pythia-6.9b",)),
    (dict(name="phi-2", arch="decoder", layers=32, hidden=2560, heads=32, intermediate=10240,
          vocab=51200, has_bias=True, source=_HF.format("microsoft/phi-2")),
     51200 - 32 * 2 * 2560, ("microsoft/phi-2",)),
    (dict(name="tinyllama-1.1b", arch="decoder", layers=22, hidden=2048, heads=32, kv_heads=4,
          intermediate=5632, vocab=32000, gated_mlp=True,
          source=_HF.format("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T")),
     0, ("tinyllama", "tinyllama/tinyllama-1.1b-chat-v1.0")),
    (dict(name="gemma-2b", arch="decoder", layers=18, hidden=2048, heads=8, kv_heads=1, head_dim=256,
          intermediate=16384, vocab=256000, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("google/gemma-2b")),
     0, ("google/gemma-2b",)),
    (dict(name="gemma-7b", arch="decoder", layers=28, hidden=3072, heads=16, kv_heads=16, head_dim=256,
          intermediate=24576, vocab=256000, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("google/gemma-7b")),
     0, ("google/gemma-7b",)),
    (dict(name="llama-3.2-1b", arch="decoder", layers=16, hidden=2048, heads=32, kv_heads=8,
          intermediate=8192, vocab=128256, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("meta-llama/Llama-3.2-1B")),
     0, ("meta-llama/llama-3.2-1b", "llama-3.2-1b-instruct")),
    (dict(name="llama-3.2-3b", arch="decoder", layers=28, hidden=3072, heads=24, kv_heads=8,
          intermediate=8192, vocab=128256, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("meta-llama/Llama-3.2-3B")),
     0, ("meta-llama/llama-3.2-3b", "llama-3.2-3b-instruct")),
    (dict(name="llama-2-7b", arch="decoder", layers=32, hidden=4096, heads=32, intermediate=11008,
          vocab=32000, gated_mlp=True, source=_HF.format("meta-llama/Llama-2-7b-hf")),
     0, ("meta-llama/llama-2-7b-hf", "llama-2-7b-hf", "llama2-7b", "llama-7b")),
    (dict(name="llama-2-13b", arch="decoder", layers=40, hidden=5120, heads=40, intermediate=13824,
          vocab=32000, gated_mlp=True, source=_HF.format("meta-llama/Llama-2-13b-hf")),
     0, ("meta-llama/llama-2-13b-hf", "llama-2-13b-hf", "llama2-13b")),
    (dict(name="llama-3-8b", arch="decoder", layers=32, hidden=4096, heads=32, kv_heads=8,
          intermediate=14336, vocab=128256, gated_mlp=True,
          source=_HF.format("meta-llama/Meta-Llama-3-8B")),
     0, ("meta-llama/meta-llama-3-8b", "meta-llama-3-8b", "llama-3.1-8b", "meta-llama/llama-3.1-8b",
         "llama3-8b", "llama-3-8b-instruct")),
    (dict(name="llama-3-70b", arch="decoder", layers=80, hidden=8192, heads=64, kv_heads=8,
          intermediate=28672, vocab=128256, gated_mlp=True,
          source=_HF.format("meta-llama/Meta-Llama-3-70B")),
     0, ("meta-llama/meta-llama-3-70b", "meta-llama-3-70b", "llama-3.1-70b", "meta-llama/llama-3.1-70b",
         "llama-3.3-70b", "llama3-70b", "llama-3-70b-instruct")),
    (dict(name="mistral-7b", arch="decoder", layers=32, hidden=4096, heads=32, kv_heads=8,
          intermediate=14336, vocab=32000, gated_mlp=True,
          source=_HF.format("mistralai/Mistral-7B-v0.1")),
     0, ("mistralai/mistral-7b-v0.1", "mistral-7b-v0.1", "mistral-7b-instruct")),
    (dict(name="qwen2.5-0.5b", arch="decoder", layers=24, hidden=896, heads=14, kv_heads=2,
          intermediate=4864, vocab=151936, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("Qwen/Qwen2.5-0.5B")),
     0, ("qwen/qwen2.5-0.5b",)),
    (dict(name="qwen2.5-1.5b", arch="decoder", layers=28, hidden=1536, heads=12, kv_heads=2,
          intermediate=8960, vocab=151936, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("Qwen/Qwen2.5-1.5B")),
     0, ("qwen/qwen2.5-1.5b",)),
    (dict(name="qwen2.5-3b", arch="decoder", layers=36, hidden=2048, heads=16, kv_heads=2,
          intermediate=11008, vocab=151936, gated_mlp=True, tied_embeddings=True,
          source=_HF.format("Qwen/Qwen2.5-3B")),
     0, ("qwen/qwen2.5-3b",)),
    (dict(name="qwen2.5-7b", arch="decoder", layers=28, hidden=3584, heads=28, kv_heads=4,
          intermediate=18944, vocab=152064, gated_mlp=True,
          source=_HF.format("Qwen/Qwen2.5-7B")),
     0, ("qwen/qwen2.5-7b",)),
    (dict(name="qwen2.5-14b", arch="decoder", layers=48, hidden=5120, heads=40, kv_heads=8,
          intermediate=13824, vocab=152064, gated_mlp=True,
          source=_HF.format("Qwen/Qwen2.5-14B")),
     0, ("qwen/qwen2.5-14b",)),
]


def resnet_shape(name: str, depths: tuple[int, ...], num_classes: int = 1000, source: str = "") -> ModelShape:
    """A bottleneck ResNet; ``layers`` counts its blocks (kernel launches scale with them)."""
    figures = vision.resnet_figures(depths, 224, num_classes=num_classes)
    return ModelShape(
        name=name, arch="cnn", params=figures.params, layers=sum(depths), hidden=2048, heads=1, kv_heads=1,
        intermediate=512, vocab=num_classes, depths=depths, image_size=224, num_classes=num_classes,
        source=source,
    )


def vit_shape(
    name: str, layers: int, hidden: int, heads: int, intermediate: int, patch: int, image_size: int,
    num_classes: int = 1000, source: str = "",
) -> ModelShape:
    return ModelShape(
        name=name, arch="vit",
        params=vision.vit_params(layers, hidden, intermediate, patch, image_size, num_classes),
        layers=layers, hidden=hidden, heads=heads, kv_heads=heads, intermediate=intermediate,
        vocab=num_classes, has_bias=True, max_positions=vision.vit_tokens(image_size, patch),
        patch_size=patch, image_size=image_size, num_classes=num_classes, source=source,
    )


# Image presets: torchvision's resnet50 (v1.5) and vit_b_16, ImageNet-1k heads.
_VISION_PRESETS: list[tuple[ModelShape, tuple[str, ...]]] = [
    (resnet_shape("resnet50", (3, 4, 6, 3), source=_HF.format("microsoft/resnet-50")),
     ("resnet-50", "resnet50-v1.5", "microsoft/resnet-50", "torchvision/resnet50")),
    (vit_shape("vit-b-16", 12, 768, 12, 3072, 16, 224, source=_HF.format("google/vit-base-patch16-224")),
     ("vit-base-patch16-224", "vit_b_16", "vit-b/16", "google/vit-base-patch16-224", "vit_base_patch16_224")),
]


def _qwen_bias(shape: ModelShape) -> int:
    # Qwen2 puts biases on q, k and v only.
    return shape.layers * (shape.q_dim + 2 * shape.kv_dim) if shape.name.startswith("qwen") else 0


@lru_cache(maxsize=1)
def _presets() -> tuple[dict[str, ModelShape], dict[str, str]]:
    shapes: dict[str, ModelShape] = {}
    index: dict[str, str] = {}
    for kw, extra, aliases in _PRESET_SPECS:
        base = _shape(**kw)
        shape = replace(base, params=base.params + extra + _qwen_bias(base))
        shapes[shape.name] = shape
        for alias in (shape.name, *aliases):
            index[_key(alias)] = shape.name
    for shape, aliases in _VISION_PRESETS:
        shapes[shape.name] = shape
        for alias in (shape.name, *aliases):
            index[_key(alias)] = shape.name
    return shapes, index


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.strip().lower())


def preset_names() -> list[str]:
    return list(_presets()[0])


def list_presets() -> list[dict[str, Any]]:
    """Rows for ``GET /v1/models``."""
    return [s.public() for s in _presets()[0].values()]


def find_preset(name: str) -> ModelShape | None:
    shapes, index = _presets()
    key = _key(name)
    if key in index:
        return shapes[index[key]]
    # Hub ids: "org/Model-Name" -> try the part after the slash, then without a variant suffix
    # (chat / instruct / -hf checkpoints share the base model's shape).
    tail = _key(name.rsplit("/", 1)[-1])
    for _ in range(3):
        if tail in index:
            return shapes[index[tail]]
        stripped = re.sub(r"(hf|chat|instruct|it|base)$", "", tail)
        if stripped == tail:
            break
        tail = stripped
    return None


def _resolve_preset(name: str) -> ModelShape:
    shape = find_preset(name)
    if shape is None:
        choices = preset_names()
        close = difflib.get_close_matches(name.strip().lower(), choices, n=3, cutoff=0.5)
        raise UnknownModel(name, close or choices)
    return shape


def _matching_preset(d: ModelDims) -> ModelShape | None:
    """A preset with exactly these dimensions and about this size (explicit BERT-large dims are
    BERT-large: an encoder with dropout and a task head)."""
    for shape in _presets()[0].values():
        same = (d.layers, d.hidden, d.heads, d.intermediate, d.vocab) == (
            shape.layers, shape.hidden, shape.heads, shape.intermediate, shape.vocab
        )
        if same and abs(shape.params / (d.params_b * 1e9) - 1) < 0.1:
            return shape
    return None


def _shape_from_dims(d: ModelDims) -> ModelShape:
    """A decoder shape for explicit dimensions; ``params_b`` stays authoritative for the count.

    Missing dimensions follow Llama-2 7B/13B proportions (``layers ~ hidden / 128``,
    ``12 * layers * hidden^2 ~ params``). Whether the MLP is gated (SwiGLU) and the output head
    tied is read off the size: the variant whose exact count is closest to ``params_b`` wins.
    """
    params = int(round(d.params_b * 1e9))
    preset = _matching_preset(d)
    if preset is not None:
        name = d.name or f"{preset.name} (explicit dimensions)"
        return replace(preset, name=name, params=params, source=f"explicit dimensions, shaped as {preset.name}")
    hidden = d.hidden
    layers = d.layers
    if hidden is None and layers is not None:
        hidden = max(64, int(round(math.sqrt(params / (12 * layers)) / 64)) * 64)
    if hidden is None:
        hidden = max(64, int(round((params * 128 / 12) ** (1 / 3) / 64)) * 64)
    if layers is None:
        layers = max(1, round(params / (12 * hidden * hidden)))
    if d.hidden is None and d.heads is not None:
        hidden = d.heads * max(1, round(hidden / d.heads))  # a width the given heads divide
    # Heads of 128 where the width allows, else of 64 (the derived width is a multiple of 64).
    heads = d.heads or max(1, hidden // 128 if hidden % 128 == 0 else hidden // 64)
    kv_heads = d.kv_heads or heads
    vocab = d.vocab or 32000
    best: ModelShape | None = None
    for gated in (False, True):
        intermediate = d.intermediate or (int(8 * hidden / 3 / 256 + 1) * 256 if gated else 4 * hidden)
        for tied in (False, True):
            cand = _shape(
                name=d.name or f"custom-{d.params_b:g}b", arch="decoder", layers=layers, hidden=hidden,
                heads=heads, kv_heads=kv_heads, intermediate=intermediate, vocab=vocab,
                gated_mlp=gated, tied_embeddings=tied, source="explicit dimensions",
            )
            if best is None or abs(cand.params - params) < abs(best.params - params):
                best = cand
    assert best is not None
    return replace(best, params=params)


def _need(cfg: dict[str, Any], *names: str) -> Any:
    for n in names:
        if cfg.get(n) is not None:
            return cfg[n]
    mt = cfg.get("model_type")
    raise UnsupportedConfig(HF_FIELD, f"config.json for model_type {mt!r} lacks {' / '.join(names)}")


_LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3"}
_SUPPORTED = sorted(
    _LLAMA_LIKE | {"phi", "gpt2", "gpt_neox", "opt", "bert", "roberta", "distilbert", "t5", "mt5", "resnet", "vit"}
)


def check_shape(shape: ModelShape, field: str) -> ModelShape:
    """Reject shapes no transformer has: non-positive sizes, heads that don't divide the width."""
    sizes = {
        "layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads, "kv_heads": shape.kv_heads,
        "intermediate": shape.intermediate, "vocab": shape.vocab,
    }
    for name, value in sizes.items():
        if not isinstance(value, int) or value <= 0:
            raise UnsupportedConfig(field, f"{name} must be a positive integer (got {value!r})")
    if shape.head_dim is not None and (not isinstance(shape.head_dim, int) or shape.head_dim <= 0):
        raise UnsupportedConfig(field, f"head_dim must be a positive integer (got {shape.head_dim!r})")
    if shape.head_dim is None and shape.hidden % shape.heads:
        raise UnsupportedConfig(field, f"hidden size {shape.hidden} is not divisible by {shape.heads} heads")
    if shape.heads % shape.kv_heads:
        raise UnsupportedConfig(field, f"{shape.heads} attention heads are not divisible by {shape.kv_heads} kv heads")
    # Each size is bounded on its own (hf_limits); their product may still describe a model no
    # one trains (1,000 layers x width 131,072): refuse it before an estimator prices it.
    if not 0 < shape.params <= MAX_PARAMS:
        raise UnsupportedConfig(
            field, f"the model has {shape.params:,} parameters; between 1 and {MAX_PARAMS:,} are accepted"
        )
    return shape


def model_from_hf_config(cfg: dict[str, Any]) -> ModelShape:
    """Read a Hugging Face ``config.json`` (llama, mistral, qwen2, gemma, phi, gpt2, gpt_neox, opt,
    bert, roberta, distilbert, t5)."""
    try:
        return check_shape(_from_hf_config(cfg), HF_FIELD)
    except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
        # A value of the wrong type ("hidden_size": "big", a list ...) is the config's fault.
        raise UnsupportedConfig(HF_FIELD, f"config.json has a value gpucost cannot read: {exc}") from None


def _from_hf_config(cfg: dict[str, Any]) -> ModelShape:
    if not isinstance(cfg, dict) or not cfg:
        raise UnsupportedConfig(HF_FIELD, "empty config.json")
    mt = cfg.get("model_type")
    if mt is None:
        raise UnsupportedConfig(HF_FIELD, "config.json lacks model_type")
    name = str(cfg.get("_name_or_path") or cfg.get("name") or mt)
    src = "hf config.json"
    if mt in _LLAMA_LIKE:
        heads = int(_need(cfg, "num_attention_heads"))
        shape = _shape(
            name=name, arch="decoder", layers=int(_need(cfg, "num_hidden_layers")),
            hidden=int(_need(cfg, "hidden_size")), heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            # Read as an int like every size (128.0 passes ``check_hf_config``): compiled, a float
            # where ``ModelShape`` says int raises TypeError; in Python it was refused later.
            head_dim=int(cfg["head_dim"]) if cfg.get("head_dim") is not None else None,
            intermediate=int(_need(cfg, "intermediate_size")),
            vocab=int(_need(cfg, "vocab_size")), gated_mlp=True,
            tied_embeddings=bool(cfg.get("tie_word_embeddings", mt.startswith("gemma"))),
            has_bias=bool(cfg.get("attention_bias", False)), source=src,
        )
        if mt == "qwen2":
            shape = replace(shape, params=shape.params + shape.layers * (shape.q_dim + 2 * shape.kv_dim))
        return shape
    if mt == "phi":
        h = int(_need(cfg, "hidden_size"))
        heads = int(_need(cfg, "num_attention_heads"))
        vocab = int(_need(cfg, "vocab_size"))
        shape = _shape(
            name=name, arch="decoder", layers=int(_need(cfg, "num_hidden_layers")), hidden=h,
            heads=heads, kv_heads=int(cfg.get("num_key_value_heads") or heads),
            intermediate=int(_need(cfg, "intermediate_size")), vocab=vocab, has_bias=True,
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), source=src,
        )
        # LM-head bias; one shared LayerNorm per block (attention and MLP run in parallel).
        return replace(shape, params=shape.params + vocab - shape.layers * 2 * h)
    if mt == "gpt2":
        h = int(_need(cfg, "n_embd", "hidden_size"))
        return _shape(
            name=name, arch="decoder", layers=int(_need(cfg, "n_layer", "num_hidden_layers")), hidden=h,
            heads=int(_need(cfg, "n_head", "num_attention_heads")), intermediate=int(cfg.get("n_inner") or 4 * h),
            vocab=int(_need(cfg, "vocab_size")), has_bias=True, tied_embeddings=True,
            max_positions=int(cfg.get("n_positions") or 1024), dropout=True, source=src,
        )
    if mt == "gpt_neox":
        return _shape(
            name=name, arch="decoder", layers=int(_need(cfg, "num_hidden_layers")),
            hidden=int(_need(cfg, "hidden_size")), heads=int(_need(cfg, "num_attention_heads")),
            intermediate=int(_need(cfg, "intermediate_size")), vocab=int(_need(cfg, "vocab_size")),
            has_bias=True, tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), source=src,
        )
    if mt == "opt":
        h = int(_need(cfg, "hidden_size"))
        proj = int(cfg.get("word_embed_proj_dim") or h)
        shape = _shape(
            name=name, arch="decoder", layers=int(_need(cfg, "num_hidden_layers")), hidden=h,
            heads=int(_need(cfg, "num_attention_heads")), intermediate=int(_need(cfg, "ffn_dim")),
            vocab=int(_need(cfg, "vocab_size")), has_bias=True, tied_embeddings=True,
            max_positions=int(cfg.get("max_position_embeddings") or 2048) + 2, dropout=True, source=src,
        )
        if proj != h:  # opt-350m projects a smaller embedding in and out
            vocab = shape.vocab
            extra = (vocab * proj - vocab * h) + 2 * proj * h
            shape = replace(shape, params=shape.params + extra)
        return shape
    if mt in ("bert", "roberta"):
        h = int(_need(cfg, "hidden_size"))
        shape = _shape(
            name=name, arch="encoder", layers=int(_need(cfg, "num_hidden_layers")), hidden=h,
            heads=int(_need(cfg, "num_attention_heads")), intermediate=int(_need(cfg, "intermediate_size")),
            vocab=int(_need(cfg, "vocab_size")), has_bias=True,
            max_positions=int(cfg.get("max_position_embeddings") or 512), dropout=True, source=src,
        )
        token_types = int(cfg.get("type_vocab_size", 2)) * h
        return replace(shape, params=shape.params + token_types + h * h + h)  # + pooler
    if mt == "distilbert":
        return _shape(
            name=name, arch="encoder", layers=int(_need(cfg, "n_layers")), hidden=int(_need(cfg, "dim")),
            heads=int(_need(cfg, "n_heads")), intermediate=int(_need(cfg, "hidden_dim")),
            vocab=int(_need(cfg, "vocab_size")), has_bias=True,
            max_positions=int(cfg.get("max_position_embeddings") or 512), dropout=True, source=src,
        )
    if mt in ("t5", "mt5"):
        d_model = int(_need(cfg, "d_model"))
        heads = int(_need(cfg, "num_heads"))
        enc = int(_need(cfg, "num_layers"))
        dec = int(cfg.get("num_decoder_layers") or enc)
        ff = str(cfg.get("feed_forward_proj", "relu"))
        shape = _shape(
            name=name, arch="encoder-decoder", layers=enc + dec, encoder_layers=enc, decoder_layers=dec,
            hidden=d_model, heads=heads, head_dim=int(cfg.get("d_kv") or d_model // heads),
            intermediate=int(_need(cfg, "d_ff")), vocab=int(_need(cfg, "vocab_size")),
            gated_mlp=ff.startswith("gated"), tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            dropout=True, source=src,
        )
        buckets = int(cfg.get("relative_attention_num_buckets") or 32)
        return replace(shape, params=shape.params + 2 * buckets * heads)
    if mt in ("resnet", "vit"):
        return _vision_from_hf_config(cfg, mt, name)
    raise UnsupportedConfig(
        HF_FIELD, f"unsupported model_type {mt!r}; supported: {', '.join(_SUPPORTED)}"
    )


def _num_labels(cfg: dict[str, Any]) -> int:
    labels = cfg.get("id2label") or cfg.get("label2id")
    if isinstance(labels, dict) and labels:
        return len(labels)
    return int(cfg.get("num_labels") or 1000)


def _vision_from_hf_config(cfg: dict[str, Any], mt: str, name: str) -> ModelShape:
    """transformers ``ResNetConfig`` (bottleneck layers) and ``ViTConfig``."""
    classes = _num_labels(cfg)
    if mt == "resnet":
        if cfg.get("layer_type", "bottleneck") != "bottleneck":
            raise UnsupportedConfig(HF_FIELD, "only bottleneck ResNets (ResNet-50 and deeper) are supported")
        depths = tuple(int(d) for d in _need(cfg, "depths"))
        hidden_sizes = [int(h) for h in _need(cfg, "hidden_sizes")]
        if len(depths) != 4 or len(hidden_sizes) != 4 or any(d <= 0 for d in depths):
            raise UnsupportedConfig(HF_FIELD, "a ResNet config needs four stage depths and hidden_sizes")
        if hidden_sizes != [256, 512, 1024, 2048] or int(cfg.get("embedding_size", 64)) != 64:
            raise UnsupportedConfig(HF_FIELD, "only the standard ResNet widths (64 stem, 256-2048) are supported")
        return resnet_shape(name, depths, classes, source="hf config.json")
    heads = int(_need(cfg, "num_attention_heads"))
    shape = vit_shape(
        name, int(_need(cfg, "num_hidden_layers")), int(_need(cfg, "hidden_size")), heads,
        int(_need(cfg, "intermediate_size")), int(cfg.get("patch_size") or 16), int(cfg.get("image_size") or 224),
        classes, source="hf config.json",
    )
    if shape.hidden % heads:
        raise UnsupportedConfig(HF_FIELD, f"hidden size {shape.hidden} is not divisible by {heads} heads")
    return shape


@lru_cache(maxsize=512)
def _resolve_cached(key: str, kind: str) -> ModelShape:
    if kind == "name":
        return _resolve_preset(key)
    if kind == "dims":
        return check_shape(_shape_from_dims(ModelDims.model_validate_json(key)), "workload.model")
    return model_from_hf_config(HfConfigSpec.model_validate_json(key).hf_config)


def resolve_model(spec: str | ModelDims | HfConfigSpec) -> ModelShape:
    """The ``ModelShape`` for a preset name, explicit dimensions or a ``config.json``."""
    if isinstance(spec, str):
        return _resolve_cached(spec, "name")
    if isinstance(spec, ModelDims):
        return _resolve_by_digest(spec, "dims")
    if isinstance(spec, HfConfigSpec):
        return _resolve_by_digest(spec, "hf")
    raise UnknownModel(str(spec), preset_names())


# Shapes of explicit models, keyed by a digest of the spec (a config.json may be large) and
# bounded, least recently used first out, so distinct payloads cannot grow memory without end.
_SPEC_SHAPES: OrderedDict[tuple[str, str], ModelShape] = OrderedDict()
_SPEC_SHAPES_MAX = 256
_SPEC_LOCK = threading.Lock()


# The last explicit spec resolved and its shape: one quote resolves its workload's model hundreds
# of times (every recipe copy of the workload shares the spec object), and a digest costs a JSON dump.
# One tuple, replaced whole, so a thread never sees one spec with another's shape.
_LAST_SPEC: tuple[object, str, ModelShape | None] = (None, "", None)


def _resolve_by_digest(spec: ModelDims | HfConfigSpec, kind: str) -> ModelShape:
    global _LAST_SPEC
    last = _LAST_SPEC
    if last[0] is spec and last[1] == kind and last[2] is not None:
        return last[2]
    shape = _resolve_by_digest_slow(spec, kind)
    _LAST_SPEC = (spec, kind, shape)
    return shape


def _resolve_by_digest_slow(spec: ModelDims | HfConfigSpec, kind: str) -> ModelShape:
    key = (kind, hashlib.sha256(spec.model_dump_json().encode()).hexdigest())
    with _SPEC_LOCK:
        hit = _SPEC_SHAPES.get(key)
        if hit is not None:
            _SPEC_SHAPES.move_to_end(key)
            return hit
    if isinstance(spec, ModelDims):
        shape = check_shape(_shape_from_dims(spec), "workload.model")
    else:
        shape = model_from_hf_config(spec.hf_config)
    with _SPEC_LOCK:
        _SPEC_SHAPES[key] = shape
        while len(_SPEC_SHAPES) > _SPEC_SHAPES_MAX:
            _SPEC_SHAPES.popitem(last=False)
    return shape


# LoRA target sets: which per-block matrices get adapters.
LORA_TARGETS = ("attention", "all-linear", "qv")


@lru_cache(maxsize=1024)
def lora_trainable_params(shape: ModelShape, rank: int, targets: str = "attention") -> int:
    """Adapter parameters: ``rank * (d_in + d_out)`` per adapted matrix.

    ``attention`` adapts q, k, v and o; ``qv`` only q and v (the LoRA paper's and PEFT's default for
    many models); ``all-linear`` every block matmul (attention and MLP).
    """
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    mats: list[tuple[int, int]]
    if targets == "qv":
        mats = [(h, q), (h, kv)]
    elif targets == "attention":
        mats = [(h, q), (h, kv), (h, kv), (q, h)]
    elif targets == "all-linear":
        mlp = [(h, i), (h, i), (i, h)] if shape.gated_mlp else [(h, i), (i, h)]
        mats = [(h, q), (h, kv), (h, kv), (q, h), *mlp]
    else:
        raise ValueError(f"unknown LoRA targets {targets!r}")
    return shape.layers * sum(rank * (a + b) for a, b in mats)
