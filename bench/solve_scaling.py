"""How fast the decision engine answers on the full catalog.

* quote latency, p50 / p95 over 200 in-process requests on the bundled snapshot plus the imported
  SkyPilot catalog, each request a distinct workload (nothing cached from an earlier request), and
  the same for 200 repeats of one workload (the estimator's memo warm);
* the baseline: a naive per-request full enumeration (estimate and price every offer x nodes x
  sharding, keep the cheapest), on 20 distinct workloads;
* portfolio plans of 10 / 50 / 100 jobs x 12 months: preparation and solve time, solver status.

Run: .venv/bin/python bench/solve_scaling.py [--reference ../shared/reference] [--requests 200]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from optimizer import costs
from optimizer.candidates import CostAssumptions
from optimizer.estimator.estimate import estimate, resolve_sharding
from optimizer.estimator.gpus import find_gpu
from optimizer.ilp.solve import solver_name
from optimizer.plan import PlanJobInput, plan
from optimizer.quote import quote
from optimizer.estimator.workload import Constraints, Workload
from pricing.adapters.skypilot_csv import load_skypilot
from pricing.offer import LocalBuild, Offer
from pricing.snapshot.loader import load_bundled

REPO = Path(__file__).resolve().parents[1]
MODELS = ["llama-3-8b", "qwen2.5-7b", "mistral-7b", "qwen2.5-3b", "qwen2.5-1.5b", "qwen2.5-0.5b", "gpt2",
          "bert-base", "roberta-base", "distilbert"]
METHODS = ["qlora", "lora", "full"]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def workload(i: int) -> Workload:
    model = MODELS[i % len(MODELS)]
    method = METHODS[(i // len(MODELS)) % len(METHODS)]
    # The token count differs per request, so no request reuses another's estimates.
    return Workload(model=model, method=method, tokens=1e8 * (1 + i / 997), micro_batch_size=4, seq_len=1024,
                    gradient_checkpointing=True)


def catalog(reference: Path) -> tuple[list[Offer], list[LocalBuild]]:
    snap = load_bundled()
    imported = load_skypilot(reference / "skypilot-catalog")
    return snap.offers + imported, snap.builds


def naive_quote(w: Workload, offers: list[Offer], builds: list[LocalBuild]) -> float | None:
    """Baseline: estimate and price every (offer, nodes, sharding) on its own, keep the cheapest.

    Same rules as the product (several nodes only of 8-GPU instances, host RAM and vCPUs per node,
    setup time billed), none of its grouping, memo or pruning; GPU partitions left out.
    """
    best: float | None = None
    for o in offers:
        gpu = find_gpu(o.gpu)
        if gpu is None or o.price_hour is None or not float(o.gpu_count).is_integer():
            continue
        for nodes in range(1, (4 if o.gpu_count >= 8 else 1) + 1):
            n = int(o.gpu_count) * nodes
            if n > 64:
                break
            for sh in resolve_sharding(w.sharding, n):
                e = estimate(w, gpu, n, sh)
                share = o.gpu_count / min(n, 8)
                if not e.fits or (o.ram_gb is not None and o.ram_gb < e.host.ram_gb * share):
                    continue
                if o.vcpus is not None and o.vcpus < e.host.cpu_cores * share:
                    continue
                c = costs.rent_cost(o.price_hour, e.hours, nodes, billing_increment_s=o.billing_increment_s,
                                    min_billing_s=o.min_billing_s).cost_per_run_usd
                best = c if best is None else min(best, c)
    for b in builds:
        gpu = find_gpu(b.gpu)
        if gpu is None:
            continue
        e = estimate(w, gpu, b.gpu_count, None)
        if e.fits and b.ram_gb >= e.host.ram_gb and b.cpu_cores >= e.host.cpu_cores:
            bc = costs.buy_cost(b.price_usd, 1, e.hours, 1, load_power_w=b.load_power_w,
                                usd_per_kwh=b.electricity_usd_per_kwh, resale_fraction=b.resale_fraction,
                                lifetime_months=b.lifetime_months)
            best = bc.total_usd if best is None else min(best, bc.total_usd)
    return best


def bench_quote(offers: list[Offer], builds: list[LocalBuild], requests: int) -> dict[str, float]:
    # Warm the imports and the model/GPU lookups once; every timed request is a new workload.
    quote(workload(10_000), Constraints(), offers, builds, prices_as_of={}, snapshot_id="bench")
    cold = []
    for i in range(requests):
        t = time.perf_counter()
        q = quote(workload(i), Constraints(), offers, builds, prices_as_of={}, snapshot_id="bench")
        cold.append(time.perf_counter() - t)
        assert q.solver.status in ("Optimal", "Infeasible (no feasible candidate)"), q.solver
    warm = []
    w = workload(0)
    for _ in range(requests):
        t = time.perf_counter()
        quote(w, Constraints(), offers, builds, prices_as_of={}, snapshot_id="bench")
        warm.append(time.perf_counter() - t)
    naive = []
    for i in range(20):
        t = time.perf_counter()
        naive_quote(workload(20_000 + i), offers, builds)
        naive.append(time.perf_counter() - t)
    return {
        "cold_p50": pct(cold, 0.5), "cold_p95": pct(cold, 0.95),
        "warm_p50": pct(warm, 0.5), "warm_p95": pct(warm, 0.95),
        "naive_p50": statistics.median(naive),
    }


def check_agreement(offers: list[Offer], builds: list[LocalBuild], n: int = 5) -> int:
    """The optimised quote and the naive enumeration find the same cheapest single-run cost."""
    whole = [o for o in offers if float(o.gpu_count).is_integer()]
    agree = 0
    for i in range(n):
        w = workload(30_000 + i)
        q = quote(w, Constraints(), whole, builds, prices_as_of={}, snapshot_id="bench",
                  assumptions=CostAssumptions(max_local_units=1))
        base = naive_quote(w, whole, builds)
        got = q.best.cost_usd if q.best else None
        agree += int(got is not None and base is not None and abs(got - base) <= 1e-3)
    return agree


def plan_jobs(n: int) -> list[PlanJobInput]:
    jobs = []
    for i in range(n):
        w = workload(40_000 + i)
        jobs.append(PlanJobInput(name=f"job-{i}", workload=w, runs_per_month=1 + i % 8,
                                 deadline_hours=None if i % 3 else 72.0))
    return jobs


def bench_plan(offers: list[Offer], builds: list[LocalBuild], sizes: list[int]) -> list[dict[str, object]]:
    rows = []
    for n in sizes:
        jobs = plan_jobs(n)
        t = time.perf_counter()
        p = plan(jobs, 12, Constraints(), offers, builds, prices_as_of={}, snapshot_id="bench", time_limit_s=60)
        total = time.perf_counter() - t
        rows.append({
            "jobs": n, "seconds_total": total, "solver_seconds": p.solver.seconds, "status": p.solver.status,
            "gap": p.solver.gap, "buy": sum(b.count for b in p.buy), "total": p.total_cost_usd,
            "all_cloud": p.all_cloud_cost_usd,
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=REPO.parent / "shared" / "reference")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--plans", default="10,50,100")
    args = ap.parse_args()
    offers, builds = catalog(args.reference)
    print(f"catalog: {len(offers)} offers, {len(builds)} builds; solver {solver_name()}")
    q = bench_quote(offers, builds, args.requests)
    print(f"quote, {args.requests} distinct workloads: p50 {q['cold_p50'] * 1e3:.1f} ms, "
          f"p95 {q['cold_p95'] * 1e3:.1f} ms")
    print(f"quote, one workload repeated {args.requests}x: p50 {q['warm_p50'] * 1e3:.1f} ms, "
          f"p95 {q['warm_p95'] * 1e3:.1f} ms")
    print(f"baseline naive full enumeration (20 distinct workloads): p50 {q['naive_p50'] * 1e3:.0f} ms "
          f"= {q['naive_p50'] / q['cold_p50']:.1f}x the quote's cold p50, "
          f"{q['naive_p50'] / q['warm_p50']:.0f}x its warm p50")
    print(f"quote's cheapest equals the naive enumeration's: {check_agreement(offers, builds)}/5 workloads")
    for row in bench_plan(offers, builds, [int(s) for s in args.plans.split(",")]):
        gap = f", gap {row['gap']:.2%}" if row["gap"] is not None else ""
        print(f"plan {row['jobs']:>3} jobs x 12 months: {row['seconds_total']:.2f} s total, solve "
              f"{row['solver_seconds']:.2f} s, {row['status']}{gap}; buys {row['buy']} machine(s); "
              f"${row['total']:,.0f} vs all-cloud ${row['all_cloud'] or 0:,.0f}")


if __name__ == "__main__":
    main()
