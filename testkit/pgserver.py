"""Start a throw-away PostgreSQL server for the tests (a real one: Debian's PostgreSQL 15).

``pg_config --bindir`` names the folder of ``initdb`` and ``pg_ctl``.  PostgreSQL refuses to run as
root, so as root the server runs as the ``postgres`` user (``runuser``).  ``SQLRP_PG_URL`` skips all
this and uses an existing server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    pass


def _bindir() -> Path:
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl) found; install postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempPostgres:
    def __init__(self) -> None:
        self.bindir = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="sqlrp-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.user = "postgres" if self.as_root else os.environ.get("USER", "postgres")

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(args[:2])} failed: {res.stderr.strip() or res.stdout.strip()}")

    def start(self) -> str:
        if self.as_root:
            shutil.chown(self.root, "postgres")
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", self.user, "-A", "trust", "--no-sync", "-E", "UTF8"
        )
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        url = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"
        deadline = time.time() + 30
        import psycopg

        while True:
            try:
                psycopg.connect(url).close()
                return url
            except psycopg.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        except PostgresUnavailable:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
