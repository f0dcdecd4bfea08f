"""Moving a workload's kept groups to a new amount of training: each group on its own against the
workload's rows (``optimizer.candidates.amount_rows``), in one process.

One unrestricted quote (``service.answers.quote_answer``, a fresh SQLite store with the bundled
snapshot, and SkyPilot's catalog with ``--skypilot-catalog``) keeps every (GPU, GPUs per node)
group's configurations. Then each round moves all of them (``KeptMoves.at``) to ``--amounts``
token counts never asked before, once with the rows switched off (``BATCH_AFTER`` past the number
of groups) and once with them, the two in turn, alternating which goes first. Prints the p50 per
quote of each and their ratio, after checking that both give every group the same configurations.

Run: .venv/bin/python bench/amount_moves.py [--rounds 6] [--amounts 200]
         [--skypilot-catalog ../shared/reference/skypilot-catalog]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from cold_quote_profile import bench_store, body  # a store seeded as the other in-process benches seed it


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--amounts", type=int, default=200, help="new token counts per round")
    ap.add_argument("--skypilot-catalog", type=Path)
    args = ap.parse_args()
    store = bench_store("gpucost-moves-", args.skypilot_catalog)
    from optimizer.candidates import amount_rows, cloud
    from service.answers import quote_answer
    from service.schemas import QuoteRequest

    req = QuoteRequest.model_validate(body("repeat"))
    quote_answer(req, store)
    moves = [entry[3] for entry in cloud._CONFIGS._data.values()]
    workloads = iter(req.workload.model_copy(update={"tokens": 1e7 + i})
                     for i in range(2 * args.rounds * args.amounts + 2))
    w = next(workloads)
    for m in moves:  # the rows are built, and each group checks them once
        m.at(w)
    w = next(workloads)
    for m in moves:
        m.at(w)
    differ = sum(1 for m in moves if m._trusted and m._rows.figures(m, w) != m._figures(m._bases, w))
    if differ:
        sys.exit(f"the rows moved {differ} groups differently from how they move on their own")

    batch_after = amount_rows.BATCH_AFTER
    times: dict[str, list[float]] = {"on their own": [], "from the rows": []}
    for r in range(args.rounds):
        order = ("on their own", "from the rows") if r % 2 == 0 else ("from the rows", "on their own")
        for name in order:
            amount_rows.BATCH_AFTER = len(moves) + 1 if name == "on their own" else batch_after
            ws = [next(workloads) for _ in range(args.amounts)]
            t = time.perf_counter()
            for w in ws:
                for m in moves:
                    m.at(w)
            times[name].append((time.perf_counter() - t) / args.amounts)
    alone_s, rows_s = (statistics.median(times[k]) for k in ("on their own", "from the rows"))
    groups = sum(1 for m in moves if m._bases)
    print(f"moving {len(moves)} kept groups ({groups} with configurations that move) to a new token count, "
          f"p50 of {args.rounds} rounds x {args.amounts} amounts:")
    print(f"  on their own   {alone_s * 1e3:7.3f} ms a quote")
    print(f"  from the rows  {rows_s * 1e3:7.3f} ms a quote  (x{rows_s / alone_s:.2f})")
    trusted = sum(1 for m in moves if m._trusted)
    print(f"groups that took the rows (and found them their own): {trusted}; refused them: "
          f"{sum(1 for m in moves if m._trusted is False)}")


if __name__ == "__main__":
    main()
