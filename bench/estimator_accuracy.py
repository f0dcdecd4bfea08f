"""Estimator accuracy on published measurements, next to the simple baselines.

    .venv/bin/python bench/estimator_accuracy.py            # per-row table and summary
    .venv/bin/python bench/estimator_accuracy.py --loso     # + leave-one-source-out refit
    .venv/bin/python bench/estimator_accuracy.py --fit      # grid-search the fitted constants

Rows: ``../shared/reference/measurement_cases.jsonl`` (when present) and
``tests/data/measurements_extra.jsonl``. VRAM is scored on ``kind=measurement`` rows with
``vram_kind=peak``; throughput on ``kind=measurement`` rows with a tokens/s figure.

Baselines: VRAM = weights + gradients + Adam states only (``accelerate estimate-memory`` style);
throughput = ``6 N`` FLOPs per token at 50% of the dense peak.

VRAM is compared as ``memory_gb.total_per_gpu`` (allocator peak + CUDA context + fragmentation,
what must fit on the card). Rows whose source measured ``torch.cuda.max_memory_allocated`` exclude
context and fragmentation, so the table also shows the like-for-like error against the predicted
allocator peak.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.estimator import calibration as cal  # noqa: E402
from optimizer.estimator.estimate import clear_cache, estimate  # noqa: E402
from optimizer.estimator.gpus import gpu_spec  # noqa: E402
from optimizer.estimator.memory import GB, baseline_states_gb, memory_parts  # noqa: E402
from optimizer.estimator.shapes import resolve_model  # noqa: E402
from optimizer.estimator.throughput import baseline_tokens_per_second, throughput  # noqa: E402
from optimizer.estimator.workload import Workload  # noqa: E402

CASE_FILES = (
    ROOT / ".." / "shared" / "reference" / "measurement_cases.jsonl",
    ROOT / "tests" / "data" / "measurements_extra.jsonl",
)
VRAM_FITTED = ("QLORA_EXTRA_BYTES_PER_PARAM",)
TPUT_FITTED = ("MATMUL_EFFICIENCY", "ACTIVATION_TRAFFIC", "DISPATCH_S_PER_LAYER")
GRID = {
    "QLORA_EXTRA_BYTES_PER_PARAM": (0.0, 0.1, 0.15, 0.2, 0.3),
    "MATMUL_EFFICIENCY": (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8),
    "ACTIVATION_TRAFFIC": (2.0, 4.0, 6.0, 8.0, 12.0),
    "DISPATCH_S_PER_LAYER": (0.0, 0.0015, 0.003, 0.0045, 0.006),
}


@dataclass
class Case:
    id: str
    source: str
    group: str
    workload: Workload
    gpu: str
    gpu_count: int
    vram_gb: float | None
    vram_kind: str
    tokens_per_second: float | None
    allocated_only: bool  # the source measured torch's allocated peak (no context / cache)


def source_group(source: str) -> str:
    """Rows from the same publication share a group (for leave-one-source-out)."""
    head = source.split(" ")[0]
    if head.startswith("github:"):
        return head
    return source.split("(")[0].split(",")[0].strip()[:48]


def load_cases(files: tuple[Path, ...] = CASE_FILES) -> list[Case]:
    cases: list[Case] = []
    for path in files:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("kind") != "measurement":
                continue
            req, measured = row["request"], row["measured"]
            text = (row.get("assumptions", "") + " " + row.get("source", "")).lower()
            cases.append(
                Case(
                    id=row["id"],
                    source=row.get("source", ""),
                    group=source_group(row.get("source", "")),
                    workload=Workload.model_validate(req["workload"]),
                    gpu=req["gpu"],
                    gpu_count=int(req.get("gpu_count", 1)),
                    vram_gb=measured.get("peak_vram_gb"),
                    vram_kind=row.get("vram_kind", "unknown"),
                    tokens_per_second=measured.get("tokens_per_second"),
                    allocated_only="max_memory_allocated" in text and "nvml" not in text,
                )
            )
    return cases


def vram_cases(cases: list[Case]) -> list[Case]:
    return [c for c in cases if c.vram_gb is not None and c.vram_kind == "peak"]


def tput_cases(cases: list[Case]) -> list[Case]:
    return [c for c in cases if c.tokens_per_second is not None]


def pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0


def _q(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(errors: list[float]) -> tuple[float, float]:
    a = [abs(e) for e in errors]
    return (statistics.median(a) if a else float("nan"), _q(a, 0.9))


# --- fast paths for fitting (no Estimate objects) -------------------------------------------


def _predict_vram_gb(c: Case) -> tuple[float, float]:
    shape = resolve_model(c.workload.model)
    est = estimate(c.workload, c.gpu, c.gpu_count)
    mem = memory_parts(shape, c.workload, gpu_spec(c.gpu), c.gpu_count, est.sharding)
    return mem.total / GB, mem.allocated_peak / GB


def _predict_tps(c: Case) -> float:
    shape = resolve_model(c.workload.model)
    gpu = gpu_spec(c.gpu)
    sharding = estimate(c.workload, c.gpu, c.gpu_count).sharding
    mem = memory_parts(shape, c.workload, gpu, c.gpu_count, sharding)
    return throughput(shape, c.workload, gpu, c.gpu_count, sharding, mem).tokens_per_second


def _loss(errors: list[float]) -> float:
    # Mean absolute error with outliers clipped: a median objective alone lets half the rows drift.
    return statistics.fmean(min(abs(e), 100.0) for e in errors)


def fit(cases: list[Case]) -> dict[str, float]:
    """Grid search of the fitted constants on ``cases``."""
    best: dict[str, float] = {}
    vc = [c for c in vram_cases(cases) if c.workload.method == "qlora"]
    if vc:
        scores = []
        for extra in GRID["QLORA_EXTRA_BYTES_PER_PARAM"]:
            with cal.overridden(QLORA_EXTRA_BYTES_PER_PARAM=extra):
                clear_cache()
                errs = [pct(_predict_vram_gb(c)[0], c.vram_gb or 1.0) for c in vc]
            scores.append((_loss(errs), extra))
        best["QLORA_EXTRA_BYTES_PER_PARAM"] = min(scores)[1]
    tc = tput_cases(cases)
    if tc:
        scores = []
        for combo in itertools.product(*(GRID[k] for k in TPUT_FITTED)):
            values = dict(zip(TPUT_FITTED, combo, strict=True))
            with cal.overridden(**values):
                errs = [pct(_predict_tps(c), c.tokens_per_second or 1.0) for c in tc]
            scores.append((_loss(errs), combo))
        best.update(zip(TPUT_FITTED, min(scores)[1], strict=True))
    clear_cache()
    return best


def loso(cases: list[Case]) -> tuple[list[float], list[float], dict[str, dict[str, float]]]:
    """Refit without each source group and predict that group's rows."""
    v_err: list[float] = []
    t_err: list[float] = []
    fitted: dict[str, dict[str, float]] = {}
    for group in sorted({c.group for c in cases}):
        train = [c for c in cases if c.group != group]
        held = [c for c in cases if c.group == group]
        values = fit(train)
        fitted[group] = values
        with cal.overridden(**values):
            clear_cache()
            v_err += [pct(estimate(c.workload, c.gpu, c.gpu_count).memory_gb.total_per_gpu, c.vram_gb or 1.0)
                      for c in vram_cases(held)]
            t_err += [pct(_predict_tps(c), c.tokens_per_second or 1.0) for c in tput_cases(held)]
        clear_cache()
    return v_err, t_err, fitted


def report(cases: list[Case]) -> dict[str, Any]:
    vrows, trows = [], []
    print(f"{'id':6} {'gpu':>10} {'n':>4}  {'measured':>9} {'predicted':>9} {'err%':>7} {'alloc err%':>10}"
          f" {'baseline':>9} {'base err%':>9}   VRAM GB")
    for c in vram_cases(cases):
        e = estimate(c.workload, c.gpu, c.gpu_count)
        alloc = e.details["memory_parts_gb"]["allocated_peak"]
        base = baseline_states_gb(resolve_model(c.workload.model), c.workload)
        err, aerr, berr = pct(e.memory_gb.total_per_gpu, c.vram_gb), pct(alloc, c.vram_gb), pct(base, c.vram_gb)
        like = aerr if c.allocated_only else err
        vrows.append((err, like, berr))
        print(f"{c.id:6} {c.gpu:>10} {c.gpu_count:>4}  {c.vram_gb:9.2f} {e.memory_gb.total_per_gpu:9.2f} {err:+7.1f}"
              f" {aerr:+10.1f}{'*' if c.allocated_only else ' '}{base:9.2f} {berr:+9.1f}")
    print("  (* source measured torch max_memory_allocated: like-for-like error is the allocator-peak column)")
    print()
    print(f"{'id':6} {'gpu':>10} {'n':>4}  {'measured':>10} {'predicted':>10} {'err%':>7} {'mfu':>5}"
          f" {'baseline':>10} {'base err%':>9}   tokens/s")
    for c in tput_cases(cases):
        e = estimate(c.workload, c.gpu, c.gpu_count)
        shape = resolve_model(c.workload.model)
        base = baseline_tokens_per_second(shape, c.workload, gpu_spec(c.gpu), c.gpu_count)
        err, berr = pct(e.tokens_per_second, c.tokens_per_second), pct(base, c.tokens_per_second)
        trows.append((err, berr))
        print(f"{c.id:6} {c.gpu:>10} {c.gpu_count:>4}  {c.tokens_per_second:10.0f} {e.tokens_per_second:10.0f}"
              f" {err:+7.1f} {e.mfu:5.2f} {base:10.0f} {berr:+9.1f}")
    out: dict[str, Any] = {}
    print()
    print(f"{'quantity':34} {'rows':>4} {'median|%|':>9} {'p90|%|':>8} {'base med':>9} {'base p90':>9} {'ratio':>6}")
    for name, errs, bases in (
        ("peak VRAM (total_per_gpu)", [r[0] for r in vrows], [r[2] for r in vrows]),
        ("peak VRAM (like-for-like)", [r[1] for r in vrows], [r[2] for r in vrows]),
        ("throughput (tokens/s)", [r[0] for r in trows], [r[1] for r in trows]),
    ):
        med, p90 = summary(errs)
        bmed, bp90 = summary(bases)
        ratio = med / bmed if bmed else float("nan")
        out[name] = {"rows": len(errs), "median": med, "p90": p90, "baseline_median": bmed,
                     "baseline_p90": bp90, "ratio": ratio}
        print(f"{name:34} {len(errs):4d} {med:9.1f} {p90:8.1f} {bmed:9.1f} {bp90:9.1f} {ratio:6.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loso", action="store_true", help="leave-one-source-out refit and score")
    ap.add_argument("--fit", action="store_true", help="grid-search the fitted constants on all rows")
    args = ap.parse_args(argv)
    cases = load_cases()
    if not cases:
        print("no measurement rows found", file=sys.stderr)
        return 1
    print(f"{len(cases)} measurement rows from {len({c.group for c in cases})} sources\n")
    report(cases)
    if args.fit:
        print("\nfitted on all rows:", fit(cases))
    if args.loso:
        v_err, t_err, fitted = loso(cases)
        print("\nleave-one-source-out (constants refitted without the held-out source):")
        for group, values in fitted.items():
            print(f"  without {group[:60]:60} {values}")
        for name, errs in (("peak VRAM (total_per_gpu)", v_err), ("throughput (tokens/s)", t_err)):
            med, p90 = summary(errs)
            print(f"  {name:32} rows {len(errs):3d}  median |%| {med:5.1f}  p90 |%| {p90:5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
