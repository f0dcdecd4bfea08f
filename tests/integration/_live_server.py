"""``gpucost serve`` in a child process on a free loopback port, for tests that need real HTTP
(a browser, curl)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(db_url: str, **extra: str) -> dict[str, str]:
    """The caller's environment without GPUCOST_* settings, with the store at ``db_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_") or k == "GPUCOST_TEST_PG_URL"}
    env.update(GPUCOST_DB_URL=db_url, AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true", **extra)
    return env


@contextmanager
def running_server(db_url: str, log: Path, timeout_s: float = 90, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the API, wait until ``/healthz`` answers, yield its base URL, stop it. ``env`` adds
    settings (``GPUCOST_ADMIN_TOKEN``, ``GPUCOST_QUOTAS``) to the server's environment."""
    with running_server_process(db_url, log, timeout_s, env) as (base, _proc):
        yield base


@contextmanager
def running_server_process(
    db_url: str, log: Path, timeout_s: float = 90, env: dict[str, str] | None = None, args: Sequence[str] = ()
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``running_server``, yielding the server's process too; ``args``: more ``serve`` options."""
    port = free_port()
    cmd = [sys.executable, "-c", "from service.cli import main; main()", "serve", "--host", "127.0.0.1",
           "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=server_env(db_url, **(env or {})), stdout=out, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"gpucost serve exited {proc.returncode}: {log.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gpucost serve did not answer within {timeout_s:g} s")
                time.sleep(0.2)
            # Fill the store (first use seeds it from the snapshot) before anyone times a request.
            with urllib.request.urlopen(f"{base}/v1/offers?limit=1", timeout=120):
                pass
            yield base, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
