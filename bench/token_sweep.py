"""A sweep of token counts over many jobs, in-process: time and resident memory.

What a planning script that varies ``tokens`` over a set of jobs costs: ``--rounds`` rounds over 18
jobs (6 models x full / LoRA / QLoRA, as ``bench/load.py`` draws them), every quote with a token
count never asked before, through ``service.answers.quote_answer`` on a fresh store seeded with the
bundled snapshot. Prints the mean time per quote (the first round's cold quotes included) and the
process's RSS before and after: the memos that let a new amount move kept figures must stay bounded.

Run: .venv/bin/python bench/token_sweep.py [--rounds 12]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from workdir import work_folder  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
MODELS = ["gpt2", "qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b", "mistral-7b", "bert-base"]
METHODS = ["full", "lora", "qlora"]


def rss_mb() -> float:
    text = Path("/proc/self/status").read_text()
    return int(text.split("VmRSS:")[1].split()[0]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12, help="rounds over the 18 jobs")
    args = ap.parse_args()
    work = work_folder("gpucost-sweep-")
    os.environ.update(GPUCOST_DB_URL=f"sqlite:///{work / 'g.sqlite'}", XDG_DATA_HOME=str(work),
                      AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    sys.path.insert(0, str(REPO))
    from pricing.store.repository import open_store
    from service.answers import quote_answer
    from service.schemas import QuoteRequest

    store = open_store(os.environ["GPUCOST_DB_URL"])
    quote_answer(QuoteRequest.model_validate({"workload": {"model": "gpt2", "tokens": 1e7}}), store)
    before = rss_mb()
    n = 0
    t = time.perf_counter()
    for _ in range(args.rounds):
        for model in MODELS:
            for method in METHODS:
                n += 1
                body = {"workload": {"model": model, "method": method, "tokens": 1e7 + 1_000 * n}}
                quote_answer(QuoteRequest.model_validate(body), store)
    seconds = time.perf_counter() - t
    print(f"{n} quotes, 18 jobs, a new token count each: {seconds / n * 1e3:.1f} ms per quote "
          f"(first round cold), RSS {before:.0f} -> {rss_mb():.0f} MB, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
