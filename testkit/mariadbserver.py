"""Start a throw-away MariaDB server for the tests (a real one: Debian's ``mariadb-server``, 10.11).

``mariadb-install-db`` makes a data folder in a temporary directory, ``mariadbd`` serves it on a free
loopback port (and a Unix socket in the same directory); :meth:`TempMariaDB.stop` shuts it down and
removes the directory.  Both are run with ``--no-defaults`` so that no option file of the machine is
read; the character set and collation Debian's ``50-server.cnf`` sets (``utf8mb4``,
``utf8mb4_general_ci``: case-insensitive, trailing spaces ignored) are given explicitly, since they are
what a user of a packaged server has and what the tests of text keys must face.  As root the server
runs as root (``--user=root``).  ``SQLRP_MARIADB_URL`` (``mysql+pymysql://user:pw@host:port``) skips
all this and uses an existing server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class MariaDBUnavailable(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
        if found:
            return found
    raise MariaDBUnavailable(f"no {names[0]} found; install mariadb-server (apt-get install mariadb-server)")


#: small and fast, for throw-away data: a 4 MiB redo log, a 32 MiB buffer pool, no flush per commit
_SERVER_OPTIONS = (
    "--skip-name-resolve",
    "--innodb-log-file-size=4M",
    "--innodb-buffer-pool-size=32M",
    "--innodb-flush-log-at-trx-commit=0",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
)


class TempMariaDB:
    """One MariaDB server in a temporary directory, on a free loopback port."""

    def __init__(self) -> None:
        self.install_db = _binary("mariadb-install-db", "mysql_install_db")
        self.server = _binary("mariadbd", "mysqld")
        self.root = Path(tempfile.mkdtemp(prefix="sqlrp-maria-"))
        self.data = self.root / "data"
        self.socket = self.root / "sock"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.process: subprocess.Popen | None = None

    def _user(self) -> list[str]:
        return ["--user=root"] if self.as_root else []

    def start(self) -> str:
        """Initialise the data folder, start the server, wait until it answers; its SQLAlchemy URL
        (``mysql+pymysql://root@127.0.0.1:PORT``, no database selected)."""
        init = subprocess.run(
            [
                self.install_db,
                "--no-defaults",
                f"--datadir={self.data}",
                *self._user(),
                "--auth-root-authentication-method=normal",  # root without password over TCP
                "--skip-test-db",
                "--skip-name-resolve",
                "--innodb-log-file-size=4M",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if init.returncode != 0:
            raise MariaDBUnavailable(f"mariadb-install-db failed: {(init.stderr or init.stdout).strip()[-500:]}")
        log = self.root / "error.log"
        self.process = subprocess.Popen(
            [
                self.server,
                "--no-defaults",
                f"--datadir={self.data}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.socket}",
                f"--pid-file={self.root / 'pid'}",
                f"--log-error={log}",
                *self._user(),
                *_SERVER_OPTIONS,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import pymysql

        deadline = time.time() + 60
        while True:
            if self.process.poll() is not None:
                text = log.read_text(errors="replace")[-800:] if log.exists() else ""
                raise MariaDBUnavailable(f"mariadbd exited with code {self.process.returncode}: {text}")
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root", password="").close()
                return f"mysql+pymysql://root@127.0.0.1:{self.port}"
            except pymysql.err.OperationalError:
                if time.time() > deadline:
                    self.stop()
                    raise MariaDBUnavailable("mariadbd did not accept connections within 60 s") from None
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server (SIGTERM: a clean shutdown; SIGKILL after 30 s) and remove its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
