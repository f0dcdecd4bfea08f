"""SkyPilot's side of bench/vs_skypilot.py: run in a Python that has SkyPilot installed.

Reads a JSON list of requests ({"gpu", "count", "clouds", "spot"}) from argv[2], asks SkyPilot's
optimizer each one ``repeats`` times in this process, and writes one JSON document to argv[3]:
per request the seconds of each call and the chosen resources with their hourly price, plus
SkyPilot's own hourly price of any instances named in the request's ``price_check`` list.

``--serve CLOUDS`` in place of argv[2] and argv[3] (a comma-separated list of clouds to enable)
answers one request at a time instead, for a caller that interleaves them with its own timings:
a line ``{"ready": ...}`` once set up, then for each JSON request line read on stdin one JSON line
on stdout with the optimizer's seconds and its error, if any.

Offline by construction: argv[1] is a catalog folder (``<cloud>/vms.csv``, ``common/``) copied into
``$SKY_RUNTIME_DIR/.sky/catalogs/v8/`` with no ``.meta/*.md5`` record, which SkyPilot treats as a
user-edited catalog and never downloads; the clouds are marked enabled in SkyPilot's own state
database (``sky.global_user_state``), as ``sky check`` would after finding credentials.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

CATALOG_VERSION = "v8"


def place_catalog(src: Path, runtime: Path) -> None:
    dst = runtime / ".sky" / "catalogs" / CATALOG_VERSION
    for cloud_dir in src.iterdir():
        if not cloud_dir.is_dir():
            continue
        (dst / cloud_dir.name).mkdir(parents=True, exist_ok=True)
        for f in cloud_dir.glob("*.csv"):
            shutil.copyfile(f, dst / cloud_dir.name / f.name)
    meta = dst / ".meta"
    if meta.exists():
        shutil.rmtree(meta)  # an md5 record would let SkyPilot replace the files with fresh downloads


def enable_clouds(names: list[str]) -> None:
    from sky import check, global_user_state, skypilot_config
    from sky.clouds import cloud as sky_cloud

    ws = skypilot_config.get_active_workspace()
    # Matching allowed-clouds record: otherwise the optimizer re-runs the credential check.
    global_user_state.set_allowed_clouds(check._get_workspace_allowed_clouds(ws), ws)
    global_user_state.set_enabled_clouds(names, sky_cloud.CloudCapability.COMPUTE, ws)


CLOUD_NAMES = {"aws": "AWS", "gcp": "GCP", "lambda": "Lambda", "azure": "Azure", "runpod": "RunPod",
               "vast": "Vast", "nebius": "Nebius", "paperspace": "Paperspace"}


def ask(req: dict[str, Any]) -> tuple[float, dict[str, Any] | None, str | None]:
    import sky
    from sky import optimizer

    task = sky.Task()
    task.set_resources({
        sky.Resources(infra=c, accelerators={req["gpu"]: req["count"]}, use_spot=req["spot"]) for c in req["clouds"]
    })
    dag = sky.Dag()
    dag.add(task)
    t = time.perf_counter()
    try:
        # The optimizer prints progress markers on stdout; this script's stdout is not the answer.
        with contextlib.redirect_stdout(io.StringIO()):
            optimizer.Optimizer.optimize(dag, minimize=sky.OptimizeTarget.COST, quiet=True)
    except Exception as exc:  # SkyPilot's "no resource satisfies" is an answer here
        return time.perf_counter() - t, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    dt = time.perf_counter() - t
    b = task.best_resources
    return dt, {
        "cloud": str(b.cloud).lower(), "instance_type": b.instance_type, "region": b.region, "zone": b.zone,
        "hourly_usd": b.get_cost(3600), "spot": b.use_spot,
        "accelerators": b.accelerators,
    }, None


def price_of(cloud: str, instance_type: str, region: str | None, spot: bool, gpu: str, count: int) -> float | None:
    import sky

    try:
        r = sky.Resources(infra=f"{cloud}/{region}" if region else cloud, instance_type=instance_type,
                          accelerators={gpu: count}, use_spot=spot)
        return float(r.get_cost(3600))
    except Exception:
        return None


def serve(clouds: list[str], import_s: float) -> None:
    import sky

    enable_clouds(sorted({CLOUD_NAMES[c] for c in clouds}))
    print(json.dumps({"ready": True, "version": sky.__version__, "import_s": import_s}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        dt, _best, error = ask(json.loads(line))
        print(json.dumps({"seconds": dt, "error": error}), flush=True)


def main() -> None:
    catalog = Path(sys.argv[1])
    runtime = Path(os.environ["SKY_RUNTIME_DIR"])
    place_catalog(catalog, runtime)
    t = time.perf_counter()
    import sky  # noqa: F401

    import_s = time.perf_counter() - t
    if sys.argv[2] == "--serve":
        serve(sys.argv[3].split(","), import_s)
        return
    requests_file, out_file = Path(sys.argv[2]), Path(sys.argv[3])
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    requests = json.loads(requests_file.read_text())
    enable_clouds(sorted({CLOUD_NAMES[c] for r in requests for c in r["clouds"]}))
    out: dict[str, Any] = {"import_s": import_s, "version": sky.__version__, "answers": []}
    for req in requests:
        times, best, error = [], None, None
        for _ in range(repeats):
            dt, best, error = ask(req)
            times.append(dt)
        checks = {}
        for chk in req.get("price_check", []):
            checks[f"{chk['cloud']}/{chk['region']}/{chk['instance_type']}"] = price_of(
                chk["cloud"], chk["instance_type"], chk["region"], req["spot"], req["gpu"], req["count"])
        out["answers"].append({"request": req, "seconds": times, "best": best, "error": error, "price_check": checks})
    out_file.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
