"""How fast the decision engine answers on the full catalog, and as the catalog grows.

* quote latency, p50 / p95, in-process on the bundled snapshot, as the service runs it (offers
  pruned once per snapshot by ``optimizer.candidates.offer_groups``) and on every offer, each
  request a distinct workload (nothing memoised from an earlier request), and for one workload
  repeated (the estimator's memo warm);
* the baseline: a naive per-request full enumeration (estimate and price every offer x nodes x
  sharding, keep the cheapest) on a few distinct workloads, for time; and the check that the
  pruned quote finds exactly the best the quote on every offer finds;
* growth: the bundled catalog synthesised up to ``--grow`` offers (each offer copied into more
  regions and zones at prices drawn from 1x to 1.4x its own), quote latency there against the
  bundled one; the one-off preparation of the pruned index is reported apart;
* plans of 10 / 50 / 100 jobs x 12 months (preparation, build and solve time, status, proven gap)
  against 100 single quotes of the same jobs' workloads, both cold (estimator memo cleared) and
  both warm.

Run: .venv/bin/python bench/solve_scaling.py [--requests 100] [--grow 100000] [--plans 10,50,100]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from code_state import describe  # bench/ is on sys.path when run as a script

from optimizer import costs
from optimizer.candidates.offer_groups import OfferIndex
from optimizer.estimator.estimate import clear_cache, estimate, resolve_sharding
from optimizer.estimator.gpus import find_gpu
from optimizer.estimator.workload import Constraints, Workload
from optimizer.ilp.solve import solver_name
from optimizer.offer import LocalBuild, Offer
from optimizer.plan import PlanJobInput, plan
from optimizer.quote import quote
from pricing.snapshot.loader import load_bundled

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


def catalog() -> tuple[list[Offer], list[LocalBuild]]:
    snap = load_bundled()
    return list(snap.offers), list(snap.builds)


def grown(offers: list[Offer], target: int, seed: int = 14) -> list[Offer]:
    """``offers`` plus copies in synthetic regions and zones, at 1x-1.4x their prices, up to ``target``."""
    rng = random.Random(seed)
    out = list(offers)
    i = 0
    while len(out) < target:
        o = offers[i % len(offers)]
        k = i // len(offers)
        f = 1 + 0.4 * rng.random()
        out.append(o.model_copy(update={
            "region": f"{o.region}-syn{k % 40}", "zone": f"{o.zone or o.region}-syn{k}",
            "price_hour": o.price_hour * f if o.price_hour else None,
            "spot_price_hour": o.spot_price_hour * (1 + 0.4 * rng.random()) if o.spot_price_hour else None,
            "ram_gb": o.ram_gb * rng.choice([0.5, 1, 1, 2]) if o.ram_gb else o.ram_gb,
        }))
        i += 1
    return out


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
    return best


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def quote_on(offers: list[Offer], builds: list[LocalBuild], w: Workload, c: Constraints | None = None,
             **kw: object) -> object:
    return quote(w, c or Constraints(), offers, builds, prices_as_of={}, snapshot_id="bench", **kw)  # type: ignore[arg-type]


def bench_quotes(label: str, offers_for: Callable[[Constraints], list[Offer]], builds: list[LocalBuild],
                 requests: int, base: int) -> dict[str, float]:
    c = Constraints()
    quote_on(offers_for(c), builds, workload(base - 1))  # imports, GPU and model lookups
    cold = [timed(lambda i=i: quote_on(offers_for(c), builds, workload(base + i)), 1)[0] for i in range(requests)]
    w = workload(base)
    warm = timed(lambda: quote_on(offers_for(c), builds, w), requests)
    restricted_c = Constraints(gpus=["A100"], providers=["aws", "gcp"], max_gpus=8, include_local=False)
    restricted = timed(lambda: quote_on(offers_for(restricted_c), builds, w, restricted_c), requests)
    r = {"cold_p50": pct(cold, 0.5), "cold_p95": pct(cold, 0.95), "warm_p50": pct(warm, 0.5),
         "warm_p95": pct(warm, 0.95), "restricted_p50": pct(restricted, 0.5)}
    print(f"{label}: distinct workloads p50 {r['cold_p50'] * 1e3:.1f} ms, p95 {r['cold_p95'] * 1e3:.1f} ms; "
          f"one workload repeated p50 {r['warm_p50'] * 1e3:.1f} ms, p95 {r['warm_p95'] * 1e3:.1f} ms; "
          f"restricted (A100, aws+gcp) p50 {r['restricted_p50'] * 1e3:.1f} ms")
    return r


def plan_jobs(n: int) -> list[PlanJobInput]:
    jobs = []
    for i in range(n):
        w = workload(40_000 + i)
        jobs.append(PlanJobInput(name=f"job-{i}", workload=w, runs_per_month=1 + i % 8,
                                 deadline_hours=None if i % 3 else 72.0))
    return jobs


def bench_plans(offers: list[Offer], builds: list[LocalBuild], sizes: list[int]) -> None:
    for n in sizes:
        jobs = plan_jobs(n)

        def quotes(jobs: list[PlanJobInput] = jobs) -> None:
            for j in jobs:
                quote_on(offers, builds, j.workload, Constraints(deadline_hours=j.deadline_hours))

        def one_plan(jobs: list[PlanJobInput] = jobs) -> object:
            return plan(jobs, 12, Constraints(), offers, builds, prices_as_of={}, snapshot_id="bench",
                        time_limit_s=60)

        clear_cache()
        q_cold = timed(quotes, 1)[0]
        clear_cache()
        t = time.perf_counter()
        p = one_plan()
        p_cold = time.perf_counter() - t
        q_warm = timed(quotes, 1)[0]
        t = time.perf_counter()
        p = one_plan()
        p_warm = time.perf_counter() - t
        gap = f", proven gap {p.solver.gap:.3%} (stated {p.assumptions.get('gap_rel', 0):.1%})" if p.solver.gap is not None else ""
        print(f"plan {n:>3} jobs x 12 months: cold {p_cold:.2f} s vs {n} cold quotes {q_cold:.2f} s "
              f"({p_cold / q_cold:.2f}x); warm {p_warm:.2f} s vs {q_warm:.2f} s ({p_warm / q_warm:.2f}x); "
              f"{p.solver.status}{gap}, {p.solve_method}; split (warm) {p.timing}; rental offers {p.rental_search}; "
              f"buys {sum(b.count for b in p.buy)}; ${p.total_cost_usd or 0:,.0f} vs all-cloud "
              f"${p.all_cloud_cost_usd or 0:,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--grow", type=int, default=100_000)
    ap.add_argument("--plans", default="10,50,100")
    args = ap.parse_args()
    print(describe())
    offers, builds = catalog()
    print(f"bundled catalog: {len(offers)} offers, {len(builds)} builds; solver {solver_name()}")
    t = time.perf_counter()
    index = OfferIndex.build(offers)
    index.view(Constraints())
    print(f"pruned index: {len(index.view(Constraints()).offers)} of {len(offers)} offers kept for an "
          f"unrestricted quote, prepared in {(time.perf_counter() - t) * 1e3:.0f} ms once per snapshot")
    pruned = bench_quotes("quote, pruned (as served)", index.view_offers, builds, args.requests, 0)
    full = bench_quotes("quote, every offer", lambda c: offers, builds, max(10, args.requests // 4), 5_000)
    print(f"pruning: {full['warm_p50'] / pruned['warm_p50']:.1f}x faster warm, "
          f"{full['cold_p50'] / pruned['cold_p50']:.1f}x cold")
    naive = [timed(lambda i=i: naive_quote(workload(20_000 + i), offers, builds), 1)[0] for i in range(5)]
    print(f"baseline naive full enumeration (5 distinct workloads): p50 {statistics.median(naive) * 1e3:.0f} ms "
          f"= {statistics.median(naive) / pruned['cold_p50']:.1f}x the pruned quote's cold p50")
    agree = 0
    for i in range(10):
        w = workload(30_000 + i)
        c = Constraints(allow_spot=bool(i % 2), providers=["aws", "gcp", "lambda"] if i % 3 == 0 else None)
        qp = quote_on(index.view_offers(c), builds, w, c)
        qf = quote_on(offers, builds, w, c)
        a, b = (qp.best.cost_usd if qp.best else None), (qf.best.cost_usd if qf.best else None)  # type: ignore[attr-defined]
        agree += int(a == b or (a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, b)))
    print(f"pruned quote's best equals the quote on every offer: {agree}/10 workloads (spot, providers varied)")

    if args.grow:
        big = grown(offers, args.grow)
        t = time.perf_counter()
        bidx = OfferIndex.build(big)
        kept = len(bidx.view(Constraints()).offers)
        print(f"grown catalog: {len(big)} offers; pruned index prepared in {time.perf_counter() - t:.1f} s once, "
              f"{kept} kept for an unrestricted quote")
        grown_r = bench_quotes(f"quote at {len(big)} offers, pruned", bidx.view_offers, builds,
                               args.requests, 10_000)
        print(f"growth {len(offers)} -> {len(big)} offers: quote time x{grown_r['warm_p50'] / pruned['warm_p50']:.2f} "
              f"warm, x{grown_r['cold_p50'] / pruned['cold_p50']:.2f} cold, "
              f"x{grown_r['restricted_p50'] / pruned['restricted_p50']:.2f} restricted (limit: 3x)")
        w = workload(10_000)
        unpruned = timed(lambda: quote_on(big, builds, w), 3)
        print(f"  (without pruning at {len(big)} offers: p50 {statistics.median(unpruned) * 1e3:.0f} ms, "
              f"{statistics.median(unpruned) / grown_r['warm_p50']:.0f}x the pruned quote)")
    bench_plans(index.view_offers(Constraints()), builds, [int(s) for s in args.plans.split(",") if s])


if __name__ == "__main__":
    main()
