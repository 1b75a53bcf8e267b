"""Run ``tiermem serve`` in a child process on loopback, for the tests and ``tiermem bench
service``: a free port, wait until ``/readyz`` answers, stop it gracefully (SIGTERM) or
kill it (SIGKILL) and start it again on the same files.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
from tiermem.errors import ServiceUnavailableError

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    """One ``tiermem serve`` child. ``start()`` returns once it is ready."""

    def __init__(
        self,
        config_file: Path,
        keys_file: Path,
        *,
        log_file: Path,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.config_file = config_file
        self.keys_file = keys_file
        self.log_file = log_file
        self.env = {**os.environ, **(env or {})}
        self.port = port or free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 120.0) -> ServerProcess:
        command = [
            sys.executable,
            "-m",
            "tiermem.cli",
            "serve",
            "--config",
            str(self.config_file),
            "--keys",
            str(self.keys_file),
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
        ]
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ServiceUnavailableError(
                    f"tiermem serve exited with {self.process.returncode}: {self.log_tail()}"
                )
            try:
                ready = httpx.get(f"{self.url}/readyz", timeout=2.0, trust_env=False)
                if ready.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        raise ServiceUnavailableError(
            f"tiermem serve not ready in {timeout_s} s: {self.log_tail()}"
        )

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then wait for the graceful shutdown; SIGKILL past ``timeout_s``."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int:
        """SIGKILL: no shutdown at all, as a crash or the OOM killer."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        return self.process.wait()


@contextmanager
def running_server(
    config_file: Path,
    keys_file: Path,
    *,
    log_file: Path,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServerProcess]:
    server = ServerProcess(config_file, keys_file, log_file=log_file, env=env).start()
    try:
        yield server
    finally:
        server.stop()
