"""Measure real training steps on the local GPU and set them next to the estimator's prediction.

    python bench/measure_training.py                          # default grid, results to measure_training.jsonl
    python bench/measure_training.py --models llama-3-8b --methods qlora --micro-batch 1,4 \\
        --seq-len 2048 --grad-ckpt on --out runs.jsonl
    python bench/measure_training.py --list                   # the grid and its predictions, no torch
    python bench/measure_training.py --device cpu --tiny      # one tiny model on the CPU (plumbing check)

Each model is built from its preset's dimensions with random weights (no download): the memory
and speed of a training step do not depend on the weights' values. Every run does ``--warmup``
untimed and ``--steps`` timed optimizer steps on random token ids and writes one JSON line in the
layout of ``measurement_cases.jsonl``; ``peak_vram_gb`` is ``torch.cuda.max_memory_allocated``
(the allocator's peak, comparable to the estimator's ``allocated_peak``), and the reserved peak
is stated in ``assumptions``. A run that runs out of memory is written with ``vram_kind`` "oom"
and the predicted total: the prediction should then exceed the card.

Needs torch and transformers (peft for LoRA, bitsandbytes for QLoRA and 8-bit Adam); they are
imported only when a run starts, so the grid, the config mapping and the row layout work without
them. Without CUDA the script exits with code 2 unless ``--device cpu --tiny`` is given.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.estimator.estimate import estimate  # noqa: E402
from optimizer.estimator.gpus import find_gpu  # noqa: E402
from optimizer.estimator.shapes import ModelShape, count_params, resolve_model  # noqa: E402
from optimizer.results import Estimate  # noqa: E402
from optimizer.estimator.workload import ModelDims, Workload  # noqa: E402
# The model building is the product's (``gpucost probe`` builds the same models).
from service.probe.model import (  # noqa: E402,F401  (re-exported: tests read them from here)
    build_model,
    family,
    hf_config_dict,
    importable,
    is_oom,
    lora_target_modules,
    make_optimizer,
    max_trainable_seq,
    train_step,
)
from service.probe.record import gpu_from_device_name  # noqa: E402,F401  (re-exported as above)

EXIT_NO_CUDA = 2
ROW_KEYS = ("id", "split", "kind", "request", "measured", "vram_kind", "confidence", "source", "assumptions")
# Bytes per GB as the estimator counts them (optimizer.estimator.memory.GB), so errors compare like for like.
GB = 1e9

# Default grid: models that train on one 80-141 GB card with these methods at the default sizes.
DEFAULT_PLAN: dict[str, tuple[str, ...]] = {
    "gpt2": ("full",),
    "qwen2.5-0.5b": ("full", "lora"),
    "llama-3.2-1b": ("full", "lora"),
    "qwen2.5-7b": ("qlora",),
    "llama-3-8b": ("qlora",),
}
DEFAULT_MICRO_BATCHES = (1, 4)
DEFAULT_SEQ_LENS = (1024,)
DEFAULT_CHECKPOINTING = (False, True)
METHODS = ("full", "lora", "qlora")

TINY_MODEL = "tiny-llama"
# Tiny Llama-shaped decoder for the CPU plumbing check: grouped-query attention, gated MLP, tied
# embeddings, so every code path of the large presets runs in a second.
_TINY_DIMS = dict(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=512)

@dataclass(frozen=True, slots=True)
class RunSpec:
    """One cell of the grid: what is trained and how."""

    model: str
    method: str
    micro_batch: int
    seq_len: int
    checkpointing: bool
    precision: str = "bf16"
    optimizer: str = "adamw"
    lora_rank: int = 16
    lora_targets: str = "attention"

    def shape(self) -> ModelShape:
        return tiny_shape() if self.model == TINY_MODEL else resolve_model(self.model)

    def workload(self) -> Workload:
        if self.model == TINY_MODEL:
            shape = tiny_shape()
            model: str | ModelDims = ModelDims(params_b=shape.params / 1e9, name=TINY_MODEL, **_TINY_DIMS)
        else:
            model = self.model
        fields: dict[str, Any] = dict(
            model=model, method=self.method, precision=self.precision, optimizer=self.optimizer,
            micro_batch_size=self.micro_batch, seq_len=self.seq_len,
            gradient_checkpointing=self.checkpointing, sharding="ddp", flash_attention=True,
            tokens=100_000_000,  # the amount of training does not change a step; 1e8 as in the reference rows
        )
        if self.method != "full":
            fields.update(lora_rank=self.lora_rank, lora_targets=self.lora_targets)
        return Workload(**fields)

    def run_id(self, device: str) -> str:
        ckpt = "gc" if self.checkpointing else "nogc"
        parts = [device, self.model, self.method, self.precision, self.optimizer,
                 f"mb{self.micro_batch}", f"s{self.seq_len}", ckpt]
        if self.method != "full":
            parts.append(f"r{self.lora_rank}-{self.lora_targets}")
        return "B-" + "-".join(parts)


@dataclass(frozen=True, slots=True)
class Measured:
    allocated_gb: float | None  # None on the CPU: there is no CUDA allocator to ask
    reserved_gb: float | None
    tokens_per_second: float
    warmup: int
    steps: int
    seconds: float
    built_params: int = 0  # parameters of the model as built (before quantization or adapters)


@dataclass(frozen=True, slots=True)
class Prediction:
    gpu: str
    total_gb: float
    allocated_gb: float
    tokens_per_second: float
    fits: bool

    @classmethod
    def of(cls, est: Estimate) -> Prediction:
        parts = est.details.get("memory_parts_gb", {})
        return cls(est.gpu, est.memory_gb.total_per_gpu, float(parts.get("allocated_peak", float("nan"))),
                   est.tokens_per_second, est.fits)


@dataclass(frozen=True, slots=True)
class Environment:
    device: str  # "cuda" or "cpu"
    device_name: str  # torch.cuda.get_device_name, or "cpu"
    gpu: str  # canonical gpucost GPU name of the card ("cpu" on the CPU)
    versions: dict[str, str]
    date: str


def tiny_shape() -> ModelShape:
    base = resolve_model("llama-3.2-1b")
    shape = replace(base, name=TINY_MODEL, source="tiny Llama-shaped test model", **_TINY_DIMS)
    return replace(shape, params=count_params(shape))


def parse_list(text: str, cast: Callable[[str], Any]) -> list[Any]:
    return [cast(t.strip()) for t in text.split(",") if t.strip()]


def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("on", "true", "yes", "1"):
        return True
    if t in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"expected on/off, got {text!r}")


def expand_grid(
    models: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    micro_batches: Sequence[int] = DEFAULT_MICRO_BATCHES,
    seq_lens: Sequence[int] = DEFAULT_SEQ_LENS,
    checkpointing: Sequence[bool] = DEFAULT_CHECKPOINTING,
    **common: Any,
) -> list[RunSpec]:
    """Every combination, in the given order. ``models`` None is the default grid; ``methods``
    None takes each model's default methods (``full`` for models outside the default grid)."""
    chosen = list(models) if models is not None else list(DEFAULT_PLAN)
    bad = [m for m in (methods or ()) if m not in METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {', '.join(bad)}; choose from {', '.join(METHODS)}")
    specs: list[RunSpec] = []
    for model in chosen:
        for method in methods or DEFAULT_PLAN.get(model, ("full",)):
            for mb, seq, ckpt in itertools.product(micro_batches, seq_lens, checkpointing):
                specs.append(RunSpec(model, method, mb, seq, ckpt, **common))
    return specs


def skip_reason(spec: RunSpec, libs: frozenset[str], device: str) -> str | None:
    """Why ``spec`` cannot run here (missing library, shape the bench does not build), or None."""
    shape = spec.shape()
    try:
        mt = hf_config_dict(shape)["model_type"]
    except ValueError as e:
        return str(e)
    if "torch" not in libs or "transformers" not in libs:
        return "torch and transformers are not importable"
    if spec.method in ("lora", "qlora") and "peft" not in libs:
        return f"{spec.method} needs peft, which is not importable"
    if spec.method == "qlora" and "bitsandbytes" not in libs:
        return "qlora needs bitsandbytes (4-bit NF4), which is not importable"
    if spec.method == "qlora" and mt == "gpt2":
        return "qlora: gpt2 uses Conv1D layers, which bitsandbytes does not quantize"
    if spec.optimizer == "adamw_8bit" and "bitsandbytes" not in libs:
        return "adamw_8bit needs bitsandbytes, which is not importable"
    if spec.precision == "fp16" and device == "cpu":
        return "fp16 autocast is a CUDA feature"
    limit = max_trainable_seq(shape)
    if limit is not None and spec.seq_len > limit:
        return f"seq_len {spec.seq_len} exceeds {shape.name}'s {limit} learned positions"
    return None


def cuda_probe() -> tuple[bool, str]:
    """Whether CUDA is usable, and why not."""
    try:
        import torch
    except ImportError:
        return False, "torch is not importable"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no CUDA device"
    return True, torch.cuda.get_device_name(0)


def predict(spec: RunSpec, gpu: str) -> Prediction:
    return Prediction.of(estimate(spec.workload(), gpu, 1, "ddp"))


def pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0


def _method_text(spec: RunSpec, env: Environment) -> str:
    mt = family(spec.shape())
    if spec.method == "full":
        weights = {"bf16-true": "bf16 weights, bf16 AdamW states (no master copy)",
                   "fp32": "fp32 weights, no autocast"}.get(
            spec.precision, f"fp32 weights with torch.autocast({spec.precision})")
        what = f"full fine-tuning, {weights}"
    else:
        base = "NF4 4-bit (bitsandbytes Linear4bit, double quantization, bf16 compute) block linears"
        base = base if spec.method == "qlora" else ("fp32" if spec.precision == "fp32" else "bf16") + " base"
        adapters = "bf16" if spec.precision == "bf16-true" else "fp32"
        what = (f"{spec.method} r={spec.lora_rank} alpha={2 * spec.lora_rank} dropout 0 on "
                f"{', '.join(lora_target_modules(mt, spec.lora_targets))} ({adapters} adapters), {base}; "
                "other frozen weights left in bf16 (no prepare_model_for_kbit_training upcast)")
    head = ("sequence-classification head (2 labels, no vocabulary logits, as the estimator assumes "
            "for encoders)" if spec.shape().arch == "encoder" else "causal-LM loss over the vocabulary")
    opt = {"adamw": "torch AdamW (default implementation)", "adamw_8bit": "bitsandbytes AdamW8bit",
           "sgd": "torch SGD"}[spec.optimizer]
    return (f"Random-weight {mt} model built with transformers from gpucost preset {spec.model}'s dimensions "
            f"(AutoConfig.for_model + from_config, attn_implementation sdpa); {what}; {head}; {opt}; "
            f"gradient checkpointing {'on (non-reentrant)' if spec.checkpointing else 'off'}; "
            f"micro-batch {spec.micro_batch} x {spec.seq_len} random token ids, one device, no gradient accumulation. "
            f"Versions: {', '.join(f'{k} {v}' for k, v in sorted(env.versions.items()))}.")


def build_row(
    spec: RunSpec, env: Environment, measured: Measured | None, prediction: Prediction | None,
) -> dict[str, Any]:
    """One line in the ``measurement_cases.jsonl`` layout. ``measured`` None: the run ran out of
    memory. On the CPU the row is of kind "plumbing" (no GPU was measured)."""
    on_gpu = env.device == "cuda"
    text = _method_text(spec, env)
    if measured is None:
        vram_kind = "oom"
        pred = f" The estimator predicted total_per_gpu {prediction.total_gb:.2f} GB." if prediction else ""
        text += f" CUDA out of memory on {env.device_name} during model build or training; nothing measured.{pred}"
        values: dict[str, float | None] = {"peak_vram_gb": None, "tokens_per_second": None}
    else:
        vram_kind = "peak" if on_gpu else "unknown"
        values = {"peak_vram_gb": None if measured.allocated_gb is None else round(measured.allocated_gb, 3),
                  "tokens_per_second": round(measured.tokens_per_second, 1)}
        timing = (f" Built model: {measured.built_params:,} parameters (preset count "
                  f"{spec.shape().params:,}). tokens/s = micro_batch x seq_len x {measured.steps} timed steps / "
                  f"{measured.seconds:.2f} s "
                  f"after {measured.warmup} warm-up steps (synchronised).")
        if on_gpu:
            text += (f" peak_vram_gb = torch.cuda.max_memory_allocated()/1e9 over warm-up and timed steps "
                     f"(allocator peak: no CUDA context, no cached free blocks; peak stats reset after the "
                     f"model was built); torch.cuda.max_memory_reserved() peak was {measured.reserved_gb:.3f} GB."
                     + timing)
        else:
            text += (" Device cpu: a plumbing check of the bench, not a measurement of any GPU; "
                     "peak_vram_gb null (no CUDA allocator)." + timing)
    source = (f"bench/measure_training.py on {env.device_name}, torch {env.versions.get('torch', '?')}, "
              f"transformers {env.versions.get('transformers', '?')}, {env.date}")
    return {
        "id": spec.run_id(env.gpu),
        "split": "bench",
        "kind": "measurement" if on_gpu else "plumbing",
        "request": {"workload": spec.workload().model_dump(mode="json", exclude_unset=True),
                    "gpu": env.gpu, "gpu_count": 1},
        "measured": values,
        "vram_kind": vram_kind,
        "confidence": "high" if on_gpu else "low",
        "source": source,
        "assumptions": text,
    }


def comparison_line(spec: RunSpec, measured: Measured | None, prediction: Prediction | None) -> str:
    """Measured next to predicted, with the % error of the prediction."""
    label = spec.run_id("")[3:]
    if prediction is None:
        return f"{label}: no prediction"
    pred = (f"pred alloc {prediction.allocated_gb:.2f} GB, total {prediction.total_gb:.2f} GB, "
            f"{prediction.tokens_per_second:.0f} tok/s on {prediction.gpu}")
    if measured is None:
        verdict = "above the card, as it should be" if not prediction.fits else "predicted to FIT: underestimate"
        return f"{label}: OOM | {pred} ({verdict})"
    parts = [f"{label}:"]
    if measured.allocated_gb is not None and measured.reserved_gb is not None:
        parts.append(f"alloc {measured.allocated_gb:.2f} GB vs pred {prediction.allocated_gb:.2f} "
                     f"({pct(prediction.allocated_gb, measured.allocated_gb):+.1f}%),")
        parts.append(f"reserved {measured.reserved_gb:.2f} GB vs pred total {prediction.total_gb:.2f} "
                     f"({pct(prediction.total_gb, measured.reserved_gb):+.1f}%, total adds CUDA context),")
        parts.append(f"{measured.tokens_per_second:.0f} tok/s vs pred {prediction.tokens_per_second:.0f} "
                     f"({pct(prediction.tokens_per_second, measured.tokens_per_second):+.1f}%)")
    else:
        parts.append(f"{measured.tokens_per_second:.0f} tok/s on cpu | {pred} (not comparable: cpu run)")
    return " ".join(parts)


# --- the torch side: imported only here ---------------------------------------------------------


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for name in ("torch", "transformers", "peft", "bitsandbytes"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def _build_model(spec: RunSpec, device: str) -> tuple[Any, int]:
    """The model ready to train, and its parameter count as built (before quantization)."""
    return build_model(spec.shape(), method=spec.method, precision=spec.precision,
                       checkpointing=spec.checkpointing, device=device, lora_rank=spec.lora_rank,
                       lora_targets=spec.lora_targets)


_make_optimizer = make_optimizer


def measure(spec: RunSpec, device: str, warmup: int, steps: int) -> Measured:
    """Build the model, train ``warmup + steps`` steps, return the peaks and tokens/s.
    Raises torch.cuda.OutOfMemoryError when it does not fit."""
    import torch

    torch.manual_seed(0)
    model, built = _build_model(spec, device)
    model.train()
    cuda = device == "cuda"
    params = [p for p in model.parameters() if p.requires_grad]
    opt = _make_optimizer(spec.optimizer, params)
    gen = torch.Generator(device="cpu").manual_seed(0)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (spec.micro_batch, spec.seq_len), generator=gen).to(device)
    if spec.shape().arch == "encoder":
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                 "labels": torch.randint(0, 2, (spec.micro_batch,), generator=gen).to(device)}
    else:
        batch = {"input_ids": ids, "labels": ids}
    step = train_step(model, batch, opt, spec.precision, device)

    if cuda:
        torch.cuda.synchronize()
        # Blocks cached while building (the 16-bit weights QLoRA quantized away) would otherwise
        # count in the reserved peak.
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    alloc = torch.cuda.max_memory_allocated() / GB if cuda else None
    reserved = torch.cuda.max_memory_reserved() / GB if cuda else None
    tps = spec.micro_batch * spec.seq_len * steps / seconds
    return Measured(alloc, reserved, tps, warmup, steps, seconds, built)


def _free_device(device: str) -> None:
    gc.collect()
    torch = sys.modules.get("torch")  # only once a run has imported it
    if device == "cuda" and torch is not None:
        torch.cuda.empty_cache()


def run_grid(
    specs: list[RunSpec], env: Environment, out: Path, warmup: int, steps: int, predict_gpu: str,
    libs: frozenset[str],
) -> int:
    """Run every spec, appending a row per run to ``out``; the number of runs that failed."""
    failed = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        for spec in specs:
            reason = skip_reason(spec, libs, env.device)
            if reason is not None:
                print(f"SKIP {spec.run_id(env.gpu)}: {reason}", flush=True)
                continue
            try:
                prediction: Prediction | None = predict(spec, predict_gpu)
            except Exception as e:  # a prediction failure must not cost the measurement
                print(f"  (no prediction: {e})")
                prediction = None
            measured: Measured | None
            try:
                measured = measure(spec, env.device, warmup, steps)
            except Exception as e:
                if env.device != "cuda" or not is_oom(e):
                    print(f"FAIL {spec.run_id(env.gpu)}: {type(e).__name__}: {e}", flush=True)
                    failed += 1
                    _free_device(env.device)
                    continue
                measured = None
            _free_device(env.device)
            row = build_row(spec, env, measured, prediction)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(comparison_line(spec, measured, prediction), flush=True)
    return failed


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help=f"comma list of presets (default: {', '.join(DEFAULT_PLAN)})")
    p.add_argument("--methods", help="comma list of full,lora,qlora (default: each model's default methods)")
    p.add_argument("--micro-batch", default=",".join(map(str, DEFAULT_MICRO_BATCHES)))
    p.add_argument("--seq-len", default=",".join(map(str, DEFAULT_SEQ_LENS)))
    p.add_argument("--grad-ckpt", default="off,on", help="comma list of on/off")
    p.add_argument("--precision", default="bf16", choices=("bf16", "bf16-true", "fp16", "fp32"))
    p.add_argument("--optimizer", default="adamw", choices=("adamw", "adamw_8bit", "sgd"))
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", default="attention", choices=("attention", "all-linear"))
    p.add_argument("--warmup", type=int, default=2, help="untimed steps (>= 1: optimizer states exist)")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--gpu", help="gpucost GPU name of the card (default: from torch.cuda.get_device_name)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--tiny", action="store_true", help="one tiny model only (with --device cpu: plumbing check)")
    p.add_argument("--out", type=Path, default=Path("measure_training.jsonl"), help="JSONL file rows are appended to")
    p.add_argument("--list", action="store_true", help="print the grid with predictions and exit (no torch)")
    return p


def specs_from_args(args: argparse.Namespace) -> list[RunSpec]:
    common = dict(precision=args.precision, optimizer=args.optimizer, lora_rank=args.lora_rank,
                  lora_targets=args.lora_targets)
    if args.tiny:
        methods = parse_list(args.methods, str) if args.methods else list(METHODS)
        return expand_grid([TINY_MODEL], methods, [2], [64], [False, True], **common)
    return expand_grid(
        parse_list(args.models, str) if args.models else None,
        parse_list(args.methods, str) if args.methods else None,
        parse_list(args.micro_batch, int), parse_list(args.seq_len, int),
        parse_list(args.grad_ckpt, parse_bool), **common,
    )


def main(argv: Sequence[str] | None = None, probe: Callable[[], tuple[bool, str]] = cuda_probe) -> int:
    args = _parser().parse_args(argv)
    try:
        specs = specs_from_args(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.warmup < 1 or args.steps < 1:
        print("error: --warmup and --steps must be at least 1", file=sys.stderr)
        return 2
    predict_gpu = args.gpu or "H100"
    if args.list:
        for spec in specs:
            try:
                p = predict(spec, predict_gpu)
                print(f"{spec.run_id(predict_gpu)}: pred alloc {p.allocated_gb:.2f} GB, total {p.total_gb:.2f} GB, "
                      f"{p.tokens_per_second:.0f} tok/s{'' if p.fits else ' (does not fit)'}")
            except Exception as e:
                print(f"{spec.run_id(predict_gpu)}: no prediction ({e})")
        return 0
    date = datetime.now(UTC).date().isoformat()
    if args.device == "cpu":
        if not args.tiny:
            print("error: --device cpu only runs the tiny plumbing check; add --tiny", file=sys.stderr)
            return 2
        if not importable(("torch",)):
            print("error: torch is not importable; install torch and transformers to run the bench",
                  file=sys.stderr)
            return EXIT_NO_CUDA
        env = Environment("cpu", "cpu", "cpu", _versions(), date)
        print(f"device cpu (plumbing check only; predictions shown for {predict_gpu}, not comparable)")
    else:
        ok, info = probe()
        if not ok:
            print(f"error: no CUDA device ({info}); this bench measures a GPU. "
                  "Use --device cpu --tiny to check the script on the CPU.", file=sys.stderr)
            return EXIT_NO_CUDA
        gpu = args.gpu or gpu_from_device_name(info)
        if gpu is None:
            print(f"error: {info!r} is not a GPU gpucost knows; pass --gpu NAME", file=sys.stderr)
            return 2
        predict_gpu = gpu
        env = Environment("cuda", info, gpu, _versions(), date)
        print(f"device {info} = gpucost {gpu}; {len(specs)} runs; rows appended to {args.out}")
    libs = importable()
    failed = run_grid(specs, env, args.out, args.warmup, args.steps, predict_gpu, libs)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
