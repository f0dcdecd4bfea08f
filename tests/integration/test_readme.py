"""Every command README.md and its manual pages under docs/ show runs, the figures they quote are the
code's, and the README stays a first screen: what it does, the two commands, the three uses, and
links to every page under docs/.

Each fenced ``bash`` block (README.md and the pages in ``RUN_PAGES``) is run as one script (``set -euo pipefail``) in a scratch folder that
holds the repository's ``.venv``, ``scripts``, ``examples`` and ``infra`` (so relative paths work
and nothing in the work tree is written), on a fresh store filled from the bundled snapshot. HTTP
examples (``localhost:8000``) go to a server this test starts; a ``gpucost serve`` line is started
and must answer ``/healthz``. ``./scripts/test`` is the command that runs this test, so it is the
one line not re-run. A ``crontab`` block must be the entry in ``infra/cron``. The generated blocks
must equal what ``scripts/readme_figures`` computes now, wherever they sit. ``./scripts/test`` itself
is checked where it can be without recursing: it stops, saying how to install Chromium, when the
browser tests could not run.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.integration._live_server import free_port, running_server, server_env

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# The pages whose bash blocks run here (docs/deploy.md's need a cluster: its files are checked instead).
RUN_PAGES = [README, *(REPO / "docs" / f for f in ("rent-or-buy.md", "api.md", "configuration.md", "estimates.md",
                                                    "performance.md"))]
MANUAL = sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.S | re.M)
# The suite's own entry point: running it from inside the suite would recurse.
SELF = "./scripts/test"


def fenced_blocks(lang: str, pages: list[Path] | None = None) -> list[str]:
    return [m["body"] for page in (pages or [README]) for m in FENCE.finditer(page.read_text(encoding="utf-8"))
            if m["lang"] == lang]


def logical_lines(block: str) -> list[str]:
    lines = block.replace("\\\n", " ").splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


BASH_BLOCKS = fenced_blocks("bash", RUN_PAGES)
HEADLINE = "./scripts/run quote --model llama-3-8b --method qlora --tokens 1e8"


def test_the_readme_shows_commands() -> None:
    commands = [line for block in BASH_BLOCKS for line in logical_lines(block)]
    assert len(BASH_BLOCKS) >= 6 and len(commands) >= 20
    assert any(SELF in line for line in commands) and any("curl" in line for line in commands)


def test_the_readme_is_a_first_screen() -> None:
    """The two commands come first and alone; what it does, the two commands and the three uses fit the
    first screens; the manual lives under docs/, each page linked from the README."""
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    first = logical_lines(fenced_blocks("bash")[0])
    assert first == [HEADLINE, SELF], first
    assert text.index(HEADLINE) < text.index("## Three uses")
    assert lines.index("## Two commands") < 30, "the two commands on the first screen"
    uses = [i for i, line in enumerate(lines) if line.startswith("### ")]
    assert len(uses) >= 3 and uses[2] < 140, "the three uses within the first screens"
    assert len(lines) < 220, f"{len(lines)} lines: the manual belongs in docs/"
    for heading in ("## How the estimates work", "## HTTP API", "## Performance and reliability", "#### "):
        assert heading not in text, f"{heading!r} is manual: it lives under docs/"
    assert "## What's new" in text
    unlinked = [p.name for p in MANUAL if f"](docs/{p.name})" not in text]
    assert not unlinked, f"docs pages without a link in README.md's Manual table: {unlinked}"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (REPO / ".venv" / "bin" / "gpucost").exists():
        pytest.fail("the README's commands need .venv (./scripts/setup creates it)")
    root = tmp_path_factory.mktemp("readme")
    for name in (".venv", "scripts", "examples", "infra"):
        (root / name).symlink_to(REPO / name)
    (root / "docs" / "img").mkdir(parents=True)
    return root


@pytest.fixture(scope="module")
def db_url(sandbox: Path) -> str:
    return f"sqlite:///{sandbox / 'gpucost.sqlite'}"


@pytest.fixture(scope="module")
def server(db_url: str, sandbox: Path) -> Iterator[str]:
    with running_server(db_url, sandbox / "server.log") as url:
        yield url


def _env(db_url: str, sandbox: Path) -> dict[str, str]:
    env = server_env(db_url, XDG_DATA_HOME=str(sandbox / "xdg"))
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("COLUMNS", None)
    return env


def _serve_checked(line: str, env: dict[str, str], cwd: Path) -> None:
    """Start a README ``gpucost serve`` line on a free port; it must answer /healthz, then stop."""
    port = free_port()
    log = cwd / f"serve-{port}.log"
    with log.open("wb") as out:
        # Its own session, so stopping it stops the shell and the server the line starts.
        proc = subprocess.Popen(["bash", "-c", f"{line} --port {port}"], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"{line!r} exited {proc.returncode}: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        pytest.fail(f"{line!r} did not answer /healthz within 90 s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("index", range(len(BASH_BLOCKS)), ids=lambda i: f"block{i + 1}")
def test_readme_block_runs(index: int, sandbox: Path, db_url: str, request: pytest.FixtureRequest) -> None:
    block = BASH_BLOCKS[index]
    env = _env(db_url, sandbox)
    script = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.strip() == SELF or line.strip().startswith(SELF + " "):
            continue  # the command running this very test
        if re.search(r"(^|\s)gpucost serve(\s|$)", line) and not line.lstrip().startswith("#"):
            _serve_checked(line.strip(), env, sandbox)
            continue
        if "localhost:8000" in line:
            base = request.getfixturevalue("server")
            # -f: an HTTP error must fail the block, not print a JSON error and pass.
            line = line.replace("localhost:8000", base.removeprefix("http://")).replace("curl -s ", "curl -sSf ")
        script.append(line)
    body = "\n".join(script)
    result = subprocess.run(["bash", "-c", "set -euo pipefail\n" + body], cwd=sandbox, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"README block {index + 1} failed:\n{body}\n--- stderr:\n{result.stderr[-3000:]}"
    if "--json" in body or "curl" in body or "--markdown" in body or "quote" in body:
        assert result.stdout.strip(), f"README block {index + 1} printed nothing"
    for out in re.findall(r"--png\s+(\S+)", body):
        assert (sandbox / out).read_bytes()[:4] == b"\x89PNG", out


def test_crontab_entry_is_the_shipped_one() -> None:
    shipped = {line.strip() for line in (REPO / "infra" / "cron" / "gpucost-refresh.cron").read_text().splitlines()}
    entries = [line for block in fenced_blocks("crontab") for line in logical_lines(block)]
    assert entries and all(line.strip() in shipped for line in entries)


@pytest.mark.parametrize("page", [README, *MANUAL], ids=lambda p: p.name)
def test_files_the_readme_names_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    # Paths in backticks are the repository's; a Markdown link is relative to its page.
    named = {REPO / p for p in re.findall(r"`((?:infra|examples|docs|bench|scripts|tests|optimizer|pricing|service)/[\w./-]+)`",
                                          text)}
    named |= {(page.parent / p).resolve() for p in re.findall(r"\]\(([\w./-]+)\)", text) if "://" not in p}
    missing = sorted(str(p) for p in named if not p.exists())
    assert not missing, missing
    if page == README:
        assert named


def _readme_figures() -> ModuleType:
    path = REPO / "scripts" / "readme_figures"
    loader = importlib.machinery.SourceFileLoader("readme_figures", str(path))
    spec = importlib.util.spec_from_loader("readme_figures", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_readme_figures_are_the_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _readme_figures()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    generated = figures.generate(tmp_path / "chart.png")
    in_readme: dict[str, str] = {}
    for page in figures.pages():
        in_readme.update(figures.readme_blocks(page.read_text(encoding="utf-8")))
    assert set(generated) <= set(in_readme), "no page holds a readme_figures block"
    assert "headline-quote" in figures.readme_blocks(README.read_text(encoding="utf-8"))
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"
    for name, body in generated.items():
        assert in_readme[name] == body, (
            f"block {name!r} is stale: run `.venv/bin/python scripts/readme_figures --write`\n"
            f"--- README\n{in_readme[name]}\n--- generated\n{body}"
        )


def test_readme_figures_check_mode_runs() -> None:
    """The script's own entry point, as a maintainer runs it."""
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "readme_figures"), "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--write" in result.stdout and "--check" in result.stdout


def test_the_test_command_requires_the_browser_or_says_how(tmp_path: Path) -> None:
    """``./scripts/test`` on a machine where Chromium is missing and cannot be installed (no apt-get on
    PATH) stops before anything else, naming what to install and how to skip on purpose."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A PATH with a shell and the few tools the scripts use, but no chromium and no apt-get.
    for tool in ("bash", "dirname", "id", "head", "cat", "mktemp", "env"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    result = subprocess.run(["bash", str(REPO / "scripts" / "test")], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, result
    assert "chromium" in result.stderr and "infra/browser-ci.sh" in result.stderr, result.stderr
    assert "GPUCOST_TEST_BROWSER=skip" in result.stderr
    assert "pip" not in result.stderr + result.stdout  # it stopped before the set-up
