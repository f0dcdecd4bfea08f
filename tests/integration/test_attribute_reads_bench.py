"""``bench/attribute_reads.py`` counts what it says: a new model reads the request's ``Workload``
thousands of times where a restricted quote reads it a few dozen, the reads are named by field
and (in Python) by function, and pydantic is left as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(*args: str, native: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    if not native:
        env["GPUCOST_NATIVE"] = "0"
    done = subprocess.run([sys.executable, str(BENCH / "attribute_reads.py"), *args, "--json"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_new_model_reads_the_workload_far_more_than_a_restricted_quote() -> None:
    out = _run("--kinds", "restricted,model", "--quotes", "2", "--warm", "1")
    rows = {r["kind"]: r for r in out["kinds"]}
    assert set(rows) == {"restricted", "model"}
    restricted, model = rows["restricted"], rows["model"]
    assert 0 < restricted["reads_per_quote"] < model["reads_per_quote"]
    # The estimator reads the workload's recipe fields per card: thousands a new model.
    assert model["by_class"]["Workload"] > 1000 > restricted["by_class"].get("Workload", 0)
    fields = {(c, f) for c, f, _ in model["by_field"]}
    assert ("Workload", "precision") in fields and ("Estimate", "fits") in fields
    # Per class and per field, the same reads counted.
    assert abs(sum(model["by_class"].values()) - model["reads_per_quote"]) < 1
    assert abs(sum(n for *_, n in model["by_field"]) - model["reads_per_quote"]) < 1
    assert model["by_function"] == []  # only asked for with --by-function


def test_reads_are_named_by_the_python_function_that_made_them() -> None:
    out = _run("--kinds", "model", "--quotes", "1", "--warm", "0", "--by-function", native=False)
    (row,) = out["kinds"]
    functions = {(m, f) for m, f, _ in row["by_function"]}
    assert ("throughput.py", "throughput") in functions
    assert abs(sum(n for *_, n in row["by_function"]) - row["reads_per_quote"]) < 1


# Run in a process of its own: importing the bench puts bench/ on sys.path (its helpers import so).
_PUT_BACK = """
import sys
sys.path.insert(0, sys.argv[1])
import attribute_reads
from pydantic import BaseModel
from optimizer.estimator.workload import Workload

before = BaseModel.__getattribute__
w = Workload(model="qwen2.5-0.5b", tokens=1e6)
counter = attribute_reads.Counter(by_function=False)
restore = counter.install()
assert "__getattribute__" in BaseModel.__dict__
counter.on = True
assert w.method == "full" and w.seq_len == 512
counter.on = False
assert w.method == "full"
restore()
assert dict(counter.fields) == {("Workload", "method"): 1, ("Workload", "seq_len"): 1}, counter.fields
assert "__getattribute__" not in BaseModel.__dict__ and BaseModel.__getattribute__ is before
print("ok")
"""


def test_reads_are_counted_only_while_on_and_pydantic_is_put_back() -> None:
    done = subprocess.run([sys.executable, "-c", _PUT_BACK, str(BENCH)], cwd=BENCH.parent, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
