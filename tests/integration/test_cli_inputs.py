"""The ``gpucost`` command given bad files and variables (exit 2 naming the flag, variable or
file; never a traceback or exit 1), and what a user expects of a command line: ``--version``,
``--request -``, examples in help, completion of names, a progress line in a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration._live_server import REPO

EXAMPLES = REPO / "examples"
QUOTE = {"workload": {"model": "gpt2", "tokens": 1e8}}


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('cli-inputs') / 'prices.sqlite'}"


def _env(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCOST_", "_GPUCOST_"))}
    env.update(GPUCOST_DB_URL=db_url, AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true", **extra)
    return env


def gpucost(db_url: str, *args: str, stdin: bytes | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from service.cli import main; main()", *args], cwd=REPO, env=_env(db_url, **env),
        input=stdin.decode() if stdin is not None else None, capture_output=True, text=True, timeout=300,
    )


def _bad_request_files(tmp: Path) -> dict[str, Path]:
    files = {
        "not-utf8": b'\xff\xfe{"workload": {"model": "gpt2"}}',
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "long-number": b'{"workload": {"model": "gpt2", "tokens": ' + b"9" * 5000 + b"}}",
        "binary": bytes(range(256)) * 40,
    }
    out = {}
    for name, data in files.items():
        path = tmp / f"{name}.json"
        path.write_bytes(data)
        out[name] = path
    return out


@pytest.mark.parametrize("kind", ["not-utf8", "deep", "long-number", "binary"])
def test_a_bad_request_file_exits_2_naming_the_flag_and_file(db_url: str, tmp_path: Path, kind: str) -> None:
    path = _bad_request_files(tmp_path)[kind]
    r = gpucost(db_url, "quote", "--request", str(path))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: --request: ") and str(path) in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_binary_catalog_import_exits_2_naming_the_file(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "vms.csv"
    path.write_bytes(bytes(range(256)) * 40)
    r = gpucost(db_url, "prices", "import", "--format", "skypilot", str(path))
    assert r.returncode == 2, r.stderr
    assert str(path) in r.stderr and "Traceback" not in r.stderr


def test_a_garbage_database_url_exits_2_naming_the_variable(tmp_path: Path) -> None:
    r = gpucost("garbage", "quote", "--model", "gpt2")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: GPUCOST_DB_URL: ")
    r = gpucost("nosuchdialect://x/y", "offers", "--gpu", "A100")
    assert r.returncode == 2 and "GPUCOST_DB_URL" in r.stderr, r.stderr


@pytest.mark.parametrize(("variable", "name"), [("GPUCOST_PRICE_BOOK", "book.yaml"), ("GPUCOST_PRICE_BOOK", "book.csv"),
                                                ("GPUCOST_FX_FILE", "rates.csv")])
def test_a_binary_price_book_or_rates_file_exits_2_naming_variable_and_file(
    db_url: str, tmp_path: Path, variable: str, name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(b"\x00\x01\xff\xfe" * 200)
    r = gpucost(db_url, "quote", "--model", "gpt2", **{variable: str(path)})
    assert r.returncode == 2, r.stderr
    assert variable in r.stderr and str(path) in r.stderr and "Traceback" not in r.stderr


def test_version(db_url: str) -> None:
    from importlib.metadata import version

    r = gpucost(db_url, "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"gpucost {version('gpucost')}"


def test_request_dash_reads_standard_input(db_url: str) -> None:
    r = gpucost(db_url, "quote", "--request", "-", "--json", stdin=json.dumps(QUOTE).encode())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["best"]["cost_usd"] > 0
    r = gpucost(db_url, "quote", "--request", "-", stdin=b"{not json")
    assert r.returncode == 2 and "--request: standard input is not valid JSON" in r.stderr


def test_a_bad_rent_gpu_is_reported_as_the_flag(db_url: str) -> None:
    r = gpucost(db_url, "breakeven", "--model", "gpt2", "--rent-gpu", "NOPE9000", "--buy-gpu", "RTX4090")
    assert r.returncode == 2 and r.stderr.startswith("error: --rent-gpu: unknown GPU 'NOPE9000'"), r.stderr
    r = gpucost(db_url, "breakeven", "--model", "gpt2", "--rent-gpu", "A100", "--buy-gpu", "RTX9999")
    assert r.returncode == 2 and r.stderr.startswith("error: --buy-gpu: unknown GPU 'RTX9999'"), r.stderr


@pytest.mark.parametrize("command", ["estimate", "quote", "breakeven", "plan", "recommend", "frontier", "offers",
                                     "gpus", "models", "serve", "prices", "prices import", "prices refresh"])
def test_every_command_help_ends_with_examples(db_url: str, command: str) -> None:
    r = gpucost(db_url, *command.split(), "--help")
    assert r.returncode == 0
    examples = r.stdout.split("Examples:", 1)[1]
    assert f"gpucost {command}" in examples


@pytest.mark.parametrize(
    ("words", "expected", "unexpected"),
    [
        ("gpucost quote --model llama-3", "llama-3-8b", "gpt2"),
        ("gpucost estimate --method q", "qlora", "full"),
        ("gpucost estimate --gpu RTX40", "RTX4090", "A100"),
        ("gpucost breakeven --buy-gpu rtx50", "RTX5090", "RTX4090"),
        ("gpucost offers --gpu H1", "H100", "A100"),
    ],
)
def test_completion_offers_presets_methods_and_gpu_names(
    db_url: str, words: str, expected: str, unexpected: str
) -> None:
    # Completion is keyed on the program's name: run the installed ``gpucost`` script.
    script = Path(sys.executable).parent / "gpucost"
    if not script.exists():
        pytest.skip("the gpucost console script is not installed next to this Python")
    env = _env(db_url, _GPUCOST_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - 1))
    r = subprocess.run([str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    offered = r.stdout.split()
    assert expected in offered and unexpected not in offered, r.stdout


def _with_terminal_stderr(db_url: str, *args: str, **env: str) -> tuple[int, str, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", "from service.cli import main; main()", *args], cwd=REPO,
                            env=_env(db_url, **env), stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    out, _ = proc.communicate(timeout=300)
    os.close(master)
    return proc.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


def test_plan_shows_a_progress_line_only_in_a_terminal(db_url: str) -> None:
    code, out, err = _with_terminal_stderr(db_url, "plan", "--request", str(EXAMPLES / "plan.json"), "--json")
    assert code == 0, err
    assert "\rplanning 1 job over 12 months: 0 s" in err and err.endswith("\r\x1b[2K")
    assert json.loads(out)["total_cost_usd"] > 0  # stdout holds only the answer
    piped = gpucost(db_url, "plan", "--request", str(EXAMPLES / "plan.json"), "--json")
    assert piped.returncode == 0 and "planning" not in piped.stderr


def test_prices_refresh_shows_progress_in_a_terminal(tmp_path: Path) -> None:
    # The reference SkyPilot catalog is an offline source: nothing is fetched from the network.
    catalog = REPO / "tests" / "data" / "reference" / "skypilot-catalog"
    url = f"sqlite:///{tmp_path / 'prices.sqlite'}"
    code, out, err = _with_terminal_stderr(url, "prices", "refresh", "--provider", "skypilot", "--json",
                                           GPUCOST_SKYPILOT_DIR=str(catalog))
    assert code == 0, err
    assert "skypilot" in err and "0:00:0" in err  # the source's bar with its elapsed time
    assert "\r" in err or "\x1b[" in err  # redrawn in place
    assert json.loads(out)["results"]
    piped = gpucost(url, "prices", "refresh", "--provider", "skypilot", GPUCOST_SKYPILOT_DIR=str(catalog))
    # Piped, the bars are not redrawn: no carriage returns or cursor moves in a log.
    assert piped.returncode == 0 and "\r" not in piped.stderr and "\x1b[" not in piped.stderr
