"""Real ``gpucost serve`` processes on loopback ports, configured as a deployment configures them:
through the environment only.

Each process gets its own HOME and data dir, no cloud credentials and no metadata-server probes,
so the cloud sources are skipped and nothing leaves the machine.
"""

from __future__ import annotations

import csv
import errno
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import pricing.snapshot

ADMIN_TOKEN = "replica-test-token"
START_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 60.0
BUNDLED_DATA = Path(pricing.snapshot.__file__).parent / "data"
# Cleared from each server's environment: a developer's own settings or cloud credentials must
# not leak into the servers under test.
_DROPPED_PREFIXES = ("GPUCOST_", "AWS_", "ALIBABA_CLOUD_", "GOOGLE_", "CLOUDSDK_")


def gpucost_command() -> list[str]:
    """The installed console script next to this interpreter, as a deployment runs it."""
    script = Path(sys.executable).with_name("gpucost")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from service.cli import main; main()"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(tmp_path: Path, db_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
    home = tmp_path / "home"
    (home / "gcloud").mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        PYTHONUNBUFFERED="1",
        AWS_EC2_METADATA_DISABLED="true",
        NO_GCE_CHECK="true",
        AWS_CONFIG_FILE=str(home / "aws-config-absent"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "aws-credentials-absent"),
        CLOUDSDK_CONFIG=str(home / "gcloud"),
        GPUCOST_DB_URL=db_url,
        GPUCOST_ADMIN_TOKEN=ADMIN_TOKEN,
    )
    env.update(extra or {})
    return env


@dataclass
class Replica:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    client: httpx.Client

    def log(self) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return text[-4000:]

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.post(path, **kwargs)

    def refresh(self, providers: list[str], timeout_s: float = REQUEST_TIMEOUT_S) -> httpx.Response:
        return self.client.post(
            "/v1/prices/refresh",
            json={"providers": providers},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=timeout_s,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None


def _wait_healthy(replica: Replica, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not replica.alive():
            raise AssertionError(f"{replica.name} exited with {replica.proc.returncode}:\n{replica.log()}")
        try:
            if replica.get("/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{replica.name} not healthy within {START_TIMEOUT_S} s:\n{replica.log()}")


@contextmanager
def replicas(tmp_path: Path, envs: Sequence[Mapping[str, str]]) -> Iterator[list[Replica]]:
    """One server per environment, started together (as a rollout does), stopped afterwards."""
    started: list[Replica] = []
    try:
        for i, env in enumerate(envs):
            name = f"replica-{i}"
            port = free_port()
            log_path = tmp_path / f"{name}.log"
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    [*gpucost_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
                    env=dict(env), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                )
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=REQUEST_TIMEOUT_S)
            started.append(Replica(name, port, proc, log_path, client))
        deadline = time.monotonic() + START_TIMEOUT_S
        for r in started:
            _wait_healthy(r, deadline)
        yield started
    finally:
        for r in started:
            r.client.close()
            if r.alive():
                r.proc.send_signal(signal.SIGTERM)
        for r in started:
            try:
                r.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait(timeout=10)


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def open_fifo_writer(path: Path) -> int | None:
    """A write end of the FIFO ``path`` if some process has it open for reading, else None.

    Opening a FIFO for writing without blocking fails with ENXIO while no reader has it open, so
    this tells, without side effects, whether a source is reading the file right now.
    """
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return None
        raise


def feed_fifo(fd: int, text: str) -> None:
    """Write ``text`` to a FIFO's write end and close it, so its reader sees the whole file."""
    os.set_blocking(fd, True)
    try:
        data = text.encode("utf-8")
        while data:
            written = os.write(fd, data)
            data = data[written:]
    finally:
        os.close(fd)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _scale_cell(cell: str, factor: float) -> str:
    def mul(m: re.Match[str]) -> str:
        return f"{float(m.group(0)) * factor:.6f}".rstrip("0").rstrip(".")

    return _NUMBER.sub(mul, cell)


def scaled_csv(text: str, column: str, factor: float) -> str:
    """The CSV ``text`` with every number in ``column`` (ranges such as ``2.0-2.8`` included)
    multiplied by ``factor``: a synthetic price change derived from real rows."""
    reader = csv.DictReader(io.StringIO(text))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(reader.fieldnames or []), lineterminator="\n")
    writer.writeheader()
    for row in reader:
        row[column] = _scale_cell(row[column], factor)
        writer.writerow(row)
    return out.getvalue()


def newest_bundled_autodl() -> Path:
    return max((BUNDLED_DATA / "autodl").glob("autodl-*.csv"), key=lambda p: p.name)


def bundled_parts_text() -> str:
    return (BUNDLED_DATA / "parts.csv").read_text(encoding="utf-8")
