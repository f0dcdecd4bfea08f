"""What a CLI command loads before it answers: only its own command module, no migration run on a
store already at the newest revision, offers read back exactly as ``model_construct`` makes them."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from fastapi.openapi.utils import get_fields_from_routes
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter
from pydantic.warnings import UnsupportedFieldAttributeWarning
from sqlalchemy import select, text

from optimizer.deferred_models import deferred
from optimizer.offer import Offer
from pricing.store.reads import _offer_builder
from pricing.store.repository import open_store
from pricing.store.rows import _OFFER_FIELDS, _offers
from pricing.store.setup import MIGRATIONS_DIR, _at_revision, _engine_for, script_head
from service.api.app import ROUTE_MODULES, create_app
from service.cli import COMMAND_MODULES, _names, app_for, build_app
from service.settings import Settings

QUOTE = ["quote", "--model", "gpt2", "--method", "lora", "--tokens", "1e6", "--json"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from service.cli import main; main()", *args],
                          check=False, env=env, capture_output=True, text=True, timeout=300)


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "GPUCOST_DB_URL": f"sqlite:///{tmp_path / 'g.sqlite'}", "XDG_DATA_HOME": str(tmp_path),
            "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}


def test_script_head_read_from_text_is_alembics_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert script_head() == ScriptDirectory.from_config(cfg).get_current_head()


def test_revision_check_is_false_until_migrated_and_true_after(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    engine = _engine_for(url)
    assert not _at_revision(engine, script_head())  # no alembic_version table yet
    engine.dispose()
    store = open_store(url)
    assert _at_revision(store.engine, script_head())
    assert not _at_revision(store.engine, "not-a-revision")
    assert not _at_revision(store.engine, None)  # a head the text reading is unsure of: migrate
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'older'"))
    assert not _at_revision(store.engine, script_head())
    store.close()


def test_reopening_a_current_store_does_not_load_alembic(tmp_path: Path) -> None:
    env = _env(tmp_path)
    code = ("import sys; from pricing.store.repository import open_store; open_store(sys.argv[1]).close(); "
            "print('alembic' in sys.modules)")
    url = env["GPUCOST_DB_URL"]
    first = subprocess.run([sys.executable, "-c", code, url], env=env, capture_output=True, text=True, check=True)
    again = subprocess.run([sys.executable, "-c", code, url], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "True"  # a new file is created by the migrations
    assert again.stdout.strip() == "False"


def test_offers_built_from_rows_equal_model_construct(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'o.sqlite'}")
    offers = store.all_offers()
    assert offers
    with store.engine.connect() as conn:
        rows = [r._asdict() for r in conn.execute(select(*[_offers.c[n] for n in _OFFER_FIELDS]))]
    build = _offer_builder()
    for row in rows:
        fast, slow = build(dict(row)), Offer.model_construct(**row)
        assert list(fast.__dict__.items()) == list(slow.__dict__.items())  # order too: dumps keep it
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump_json() == slow.model_dump_json()
    # The fields stored rows lack come from Offer's default factories, per row.
    assert {o.inter_node_fabric for o in offers} == {True, False}
    store.close()


def test_app_for_registers_only_the_command_asked_for() -> None:
    assert _names(app_for(["quote", "--json"])) == {"quote"}
    assert _names(app_for(["offers"])) == {"offers", "prices"}
    assert _names(app_for(["models"])) == {"gpus", "models"}
    full = _names(build_app())
    assert len(full) > len(COMMAND_MODULES) - 1
    for argv in ([], ["--help"], ["quot"], ["no-such-command"]):
        assert _names(app_for(argv)) == full


def test_single_command_app_keeps_the_subcommand_and_its_answer(tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = _run(QUOTE, env)
    assert done.returncode == 0, done.stderr
    assert "options" in json.loads(done.stdout)
    helped = _run(["quote", "--help"], env)
    full = subprocess.run([sys.executable, "-c", "from service.cli import app; app()", "quote", "--help"],
                          check=False, env=env, capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "quote [OPTIONS]" in helped.stdout
    assert helped.stdout == full.stdout  # the same help as with every command registered
    bad = _run(["quote", "--tokens", "many"], env)
    assert bad.returncode == 2 and "--tokens" in bad.stderr
    typo = _run(["quot"], env)
    assert typo.returncode == 2 and "quote" in typo.stderr


def test_settings_come_from_the_environment_and_a_bad_one_names_its_variable(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "GPUCOST_MAX_SOLVES": "abc"}
    bad = _run(QUOTE, env)
    assert bad.returncode == 2 and "GPUCOST_MAX_SOLVES" in bad.stderr and "Traceback" not in bad.stderr
    out_of_range = _run(QUOTE, {**_env(tmp_path), "GPUCOST_REQUEST_TIME_LIMIT_S": "0"})
    assert out_of_range.returncode == 2 and "GPUCOST_REQUEST_TIME_LIMIT_S" in out_of_range.stderr
    # Lists as the docs and the Kubernetes ConfigMap write them; names in any case.
    code = ("from service.settings import get_settings as g; s = g(); "
            "print(s.aws_regions, s.gcp_regions, s.stale_after_days, s.answer_cache)")
    env = {**_env(tmp_path), "GPUCOST_AWS_REGIONS": "us-east-1, eu-west-1", "GPUCOST_GCP_REGIONS": '["us-east4"]',
           "gpucost_stale_after_days": "5", "GPUCOST_ANSWER_CACHE": "false"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "('us-east-1', 'eu-west-1') ('us-east4',) 5.0 False"


def test_a_command_imports_with_the_collector_off_and_runs_with_it_on(tmp_path: Path) -> None:
    """``main`` imports the command's modules with the cycle collector off, freezes what they made,
    and runs the command with the collector on (a served process needs it; so does a long refresh)."""
    probe = (
        "import atexit, gc, sys\n"
        "from service import cli\n"
        "seen = []\n"
        "real = cli.app_for\n"
        "cli.app_for = lambda argv: (seen.append(gc.isenabled()), real(argv))[1]\n"
        "atexit.register(lambda: print('collector', seen, gc.isenabled(), gc.get_freeze_count()))\n"
        "cli.main()\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *QUOTE], check=False, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("collector"))
    _, during_imports, during_command, frozen = line.split(" ", 3)
    assert (during_imports, during_command) == ("[False]", "True")
    assert int(frozen) > 50_000  # the imported modules' objects
    assert json.loads(out.stdout[: out.stdout.index("collector")])["best"] is not None


# At exit: gpucost's models that wait to be built until first used, those of them built by then,
# and which of the modules a quote has no use for were imported (break-even, measurements, click).
MODELS = (
    "import atexit, json, sys\n"
    "def report():\n"
    "    from optimizer.deferred_models import deferred, own_models\n"
    "    lazy = [c for c in own_models() if deferred(c)]\n"
    "    sys.stderr.write('\\nMODELS ' + json.dumps([sorted(c.__qualname__ for c in lazy),\n"
    "                     sorted(c.__qualname__ for c in lazy if c.__pydantic_complete__),\n"
    "                     [m for m in ('optimizer.breakeven', 'optimizer.measurement', 'click')\n"
    "                      if m in sys.modules]]) + '\\n')\n"
    "atexit.register(report)\n"
)


def _models_at_exit(code: str, args: list[str], env: dict[str, str]) -> tuple[str, list[str], list[str], list[str]]:
    done = subprocess.run([sys.executable, "-c", MODELS + code, *args], check=False, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lazy, built, unused = json.loads(done.stderr.rsplit("MODELS ", 1)[1])
    return done.stdout, lazy, built, unused


def test_a_quote_builds_none_of_the_models_it_never_validates_or_serialises(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = _run(QUOTE, env)  # creates and seeds the store (offers validated) and prepares its snapshot
    assert first.returncode == 0, first.stderr
    out, lazy, built, unused = _models_at_exit("from service.cli import main\nmain()\n", QUOTE, env)
    assert json.loads(out)["best"] is not None
    # The tables' labels import break-even's result type only to annotate; measurements' models
    # load only where some are stored; typer carries its own click.
    assert unused == []
    # Offers read back, an estimate's parts, the pieces and routes of other requests and answers.
    assert {"Offer", "MemoryBreakdown", "HostNeeds", "JobSpec", "RunBill", "ProviderStatus",
            "PlanRequest", "RunRequest", "PlannedRun", "PricesStatus"} <= set(lazy)
    assert built == []


def test_a_served_app_builds_every_deferred_model_when_it_is_made(tmp_path: Path) -> None:
    _, lazy, built, _ = _models_at_exit("from service.api.app import create_app\ncreate_app()\n", [], _env(tmp_path))
    assert len(lazy) > 20
    assert built == lazy


def test_routes_answer_without_building_a_validator(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Route models a CLI quote never uses wait to be built (``defer_build``). FastAPI's validators and
    serializers for a route follow its model's ``defer_build``, so the app builds them when it is made
    (``build_route_validators``): no request builds one, nor warns about the ``Field`` they wrap."""
    lazy = set()
    for name in ROUTE_MODULES:
        for route in importlib.import_module(f"service.api.routes.{name}").router.routes:
            if not isinstance(route, APIRoute):
                continue
            for t in (route.response_model, *(p.field_info.annotation for p in route.dependant.body_params)):
                if isinstance(t, type) and issubclass(t, BaseModel) and deferred(t):
                    lazy.add(t.__name__)
    assert {"PlanRequest", "BreakevenRequest", "RunRequest", "OffersResponse", "PricesStatus", "RunsResponse"} <= lazy

    app = create_app(Settings(db_url=tmp_db_url))
    fields = get_fields_from_routes(app.routes)
    assert len(fields) > 30 and all(f._type_adapter.pydantic_complete for f in fields)

    builds: list[str] = []
    real = TypeAdapter._init_core_attrs

    def counting(self: TypeAdapter[Any], ns_resolver: Any, force: bool, raise_errors: bool = False) -> bool:
        if force:
            builds.append(repr(self))
        return real(self, ns_resolver, force, raise_errors)

    monkeypatch.setattr(TypeAdapter, "_init_core_attrs", counting)
    asks = [("POST", "/v1/plan", {"jobs": []}, 422), ("POST", "/v1/breakeven", {}, 422),
            ("POST", "/v1/recommend", {}, 422), ("POST", "/v1/estimate", {}, 422), ("POST", "/v1/runs", {}, 422),
            ("GET", "/v1/offers?limit=1", None, 200), ("GET", "/v1/prices/status", None, 200),
            ("GET", "/v1/runs", None, 200), ("GET", "/v1/spend", None, 200), ("GET", "/v1/calibration", None, 200)]
    with TestClient(app) as client, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for method, path, body, status in asks:
            assert client.request(method, path, json=body).status_code == status, path
    assert builds == []
    assert not [w for w in seen if issubclass(w.category, UnsupportedFieldAttributeWarning)]


def test_the_startup_bench_runs_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """``bench/cli_startup.py``, once per row: every row timed, the copy without bytecode used."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "bench" / "cli_startup.py"),
                           "--runs", "1"], check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("code measured: ")
    rows = {line.strip().split("  ")[0]: line for line in done.stdout.splitlines() if " s wall " in line}
    assert {"python -c pass", "gpucost --help",
            "gpucost quote --model llama-3-8b --method qlora --tokens 1e8 --json"} <= set(rows), done.stdout
    assert "the quote with the project's bytecode written (scripts/setup): " in done.stdout
    assert "numpy's OpenBLAS on one thread while the command loads: " in done.stdout
    assert "pydantic's plugin look-up skipped while the command loads: " in done.stdout
    assert "read through PreparedReader" in done.stdout
    assert list(tmp_path.iterdir()) == []  # its store, prepared files and the copy removed


# A command run through ``main`` that reports, as the process ends, how many threads it has, what
# OPENBLAS_NUM_THREADS and PYDANTIC_DISABLE_PLUGINS say then, and whether pydantic looked for plugins.
_AT_EXIT = (
    "import atexit, os, sys\n"
    "from service import cli\n"
    "def report():\n"
    "    from pydantic.plugin import _loader\n"
    "    sys.stderr.write(f\"threads={len(os.listdir('/proc/self/task'))} "
    "blas={os.environ.get('OPENBLAS_NUM_THREADS')} plugins={os.environ.get('PYDANTIC_DISABLE_PLUGINS')} "
    "looked={_loader._plugins is not None}\\n\")\n"
    "atexit.register(report)\n"
    "cli.main()\n"
)


def _at_exit(env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", _AT_EXIT, *QUOTE], check=False, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    json.loads(done.stdout)  # the answer is still one JSON document
    return dict(item.split("=", 1) for item in done.stderr.strip().splitlines()[-1].split())


def test_a_command_loads_numpy_on_one_blas_thread_and_leaves_the_environment_as_given(tmp_path: Path) -> None:
    """numpy's OpenBLAS starts a thread per core as it loads, which spin for nothing (gpucost calls no
    BLAS routine). ``main`` asks for one while the command loads, unless the user set a count, and
    takes the variable away again before the command runs (its children get the user's environment)."""
    env = {k: v for k, v in _env(tmp_path).items() if k != "OPENBLAS_NUM_THREADS"}
    _at_exit(env)  # the store set up first, so the runs below only answer
    one = _at_exit(env)
    assert one["blas"] == "None"  # not left behind for what the command starts
    cores = str(len(os.sched_getaffinity(0)))
    every = _at_exit({**env, "OPENBLAS_NUM_THREADS": cores})
    assert every["blas"] == cores  # the user's own setting is kept
    user_one = _at_exit({**env, "OPENBLAS_NUM_THREADS": "1"})
    assert one["threads"] == user_one["threads"]  # as if the user had asked for one thread
    if int(cores) > 1:
        assert int(every["threads"]) > int(one["threads"])  # OpenBLAS's own threads tell the two apart


def test_a_quote_never_looks_for_pydantic_plugins_unless_the_user_says_so(tmp_path: Path) -> None:
    """pydantic looks through every installed package's entry points for plugins as it builds its first
    model; ``main`` turns that off while the command loads (a quote builds no model after), unless the
    user set PYDANTIC_DISABLE_PLUGINS, and takes the variable away again before the command runs."""
    env = {k: v for k, v in _env(tmp_path).items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    _at_exit(env)
    quiet = _at_exit(env)
    assert (quiet["looked"], quiet["plugins"]) == ("False", "None")
    given = _at_exit({**env, "PYDANTIC_DISABLE_PLUGINS": ""})  # set, empty: pydantic looks as before
    assert (given["looked"], given["plugins"]) == ("True", "")
