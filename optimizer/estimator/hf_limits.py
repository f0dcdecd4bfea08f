"""Limits a Hugging Face ``config.json`` must respect before any arithmetic is done with it.

A config is untrusted JSON: it may be megabytes large, nested a thousand deep, or hold
``num_hidden_layers: 1e308`` (an OverflowError later), ``10**30`` (an answer in years of
nonsense) or a negative ``type_vocab_size`` (a negative parameter count, hence negative hours
and a $0 quote). Every size field a supported architecture reads must be an integer within what
a real model has; the whole document must be small and shallow. Pure functions; the pydantic
validator of ``HfConfigSpec`` calls ``check_hf_config``.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Real config.json files are 1-50 kB (ImageNet label maps are the large ones).
MAX_CONFIG_BYTES = 256_000
MAX_DEPTH = 8
MAX_ITEMS = 50_000

_LAYERS = 1_000
_WIDTH = 131_072
_HEADS = 4_096
_FFN = 1_048_576

# field -> (least, most). Upper bounds sit well above the largest published models (e.g. 126
# layers, width 16,384, vocabulary 256,000) and far below anything that overflows a float.
SIZE_FIELDS: dict[str, tuple[int, int]] = {
    **{k: (1, _LAYERS) for k in ("num_hidden_layers", "n_layer", "n_layers", "num_layers",
                                 "num_decoder_layers", "num_encoder_layers")},
    **{k: (1, _WIDTH) for k in ("hidden_size", "n_embd", "d_model", "dim", "word_embed_proj_dim")},
    **{k: (1, _HEADS) for k in ("num_attention_heads", "n_head", "n_heads", "num_heads",
                                "num_key_value_heads")},
    **{k: (1, _FFN) for k in ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim")},
    "vocab_size": (1, 4_000_000),
    "max_position_embeddings": (1, 16_777_216),
    "n_positions": (1, 16_777_216),
    "head_dim": (1, 65_536),
    "d_kv": (1, 65_536),
    "type_vocab_size": (0, 1_024),
    "relative_attention_num_buckets": (1, 65_536),
    "image_size": (1, 16_384),
    "patch_size": (1, 4_096),
    "num_channels": (1, 1_024),
    # Image classifiers: ImageNet-21k has 21,843 classes; the largest published heads hold a few
    # hundred thousand. ResNet stems are 64 wide (embedding_size).
    "num_labels": (1, 1_000_000),
    "embedding_size": (1, _WIDTH),
}

# List-valued size fields: (longest list, least item, most item). ResNet-152 is
# depths [3, 8, 36, 3] and the CIFAR ResNet-1202 has 200 blocks a stage; a ResNet config with
# ``depths: [3, 4, 100000000, 3]`` (400 bytes) would otherwise loop for tens of minutes.
LIST_FIELDS: dict[str, tuple[int, int, int]] = {
    "depths": (16, 1, 1_000),
    "hidden_sizes": (16, 1, _WIDTH),
}
# A ViT's sequence is (image_size / patch_size)^2 + 1 tokens: about the ceiling of ``seq_len``.
MAX_VIT_TOKENS = 1_048_577  # 1024 x 1024 patches and the class token
# The largest model a request may describe (``ModelDims.params_b`` caps at 2,000 billion).
MAX_PARAMS = 2_000 * 10**9
# The smallest: a thousand parameters (params_b 1e-300 would otherwise be a 0-parameter model).
MIN_PARAMS_B = 1e-6


def _depth_and_items(value: Any, depth: int = 1) -> tuple[int, int]:
    """(deepest nesting, number of values), stopping early once past the limits."""
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return depth, 1
    if depth > MAX_DEPTH:
        return depth, len(children)
    deepest, items = depth, 1
    for child in children:
        d, n = _depth_and_items(child, depth + 1)
        deepest, items = max(deepest, d), items + n
        if deepest > MAX_DEPTH or items > MAX_ITEMS:
            break
    return deepest, items


def _integral(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def check_hf_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` unchanged, or ``ValueError`` naming the field (``hf_config.<key>``) and the limit."""
    depth, items = _depth_and_items(cfg)
    if depth > MAX_DEPTH:
        raise ValueError(f"hf_config is nested more than {MAX_DEPTH} levels deep")
    if items > MAX_ITEMS:
        raise ValueError(f"hf_config holds more than {MAX_ITEMS:,} values")
    try:
        size = len(json.dumps(cfg, allow_nan=True, default=str))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"hf_config is not plain JSON: {exc}") from None
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"hf_config is {size:,} bytes; at most {MAX_CONFIG_BYTES:,} are accepted")
    for key, (least, most) in SIZE_FIELDS.items():
        value = cfg.get(key)
        if value is None:
            continue
        number = _integral(value)
        if number is None:
            raise ValueError(f"hf_config.{key} must be an integer (got {value!r:.40})")
        if not least <= number <= most:
            raise ValueError(f"hf_config.{key} must be between {least:,} and {most:,} (got {value!r:.40})")
    for key, (longest, least, most) in LIST_FIELDS.items():
        value = cfg.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not 1 <= len(value) <= longest:
            raise ValueError(f"hf_config.{key} must be a list of 1 to {longest} integers (got {value!r:.40})")
        for item in value:
            number = _integral(item)
            if number is None or not least <= number <= most:
                raise ValueError(
                    f"hf_config.{key} items must be integers between {least:,} and {most:,} (got {item!r:.40})"
                )
    image, patch = _integral(cfg.get("image_size")), _integral(cfg.get("patch_size"))
    if cfg.get("model_type") == "vit" and image is not None and patch is not None:
        tokens = (image // patch) ** 2 + 1
        if tokens > MAX_VIT_TOKENS:
            raise ValueError(
                f"hf_config.image_size / patch_size give {tokens:,} tokens; at most {MAX_VIT_TOKENS:,} are accepted"
            )
    return cfg
