"""Start a throw-away Sail server for the tests (a real one: pip ``pysail``, a Spark Connect server in
Rust; ``sail spark server --ip 127.0.0.1 --port P``), on a free loopback port, in a temporary folder
(its warehouse, ``spark-warehouse/``, goes there); :meth:`TempSail.stop` stops it and removes the folder.

Sail imports ``pyspark`` in its own process and refuses every session when that PySpark is one it does
not know (Sail 0.7.2: 3.x to 4.2; :mod:`sqlrp.backends.spark_connect`); the client's PySpark is not
checked.  The server runs on ``SQLRP_SAIL_PYTHON`` (a Python with ``pysail`` and such a PySpark: what a
user deploys beside a newer client), else on this Python, whose PySpark must then be one Sail knows
(:class:`SailUnavailable` otherwise, naming both ways out).  Started with ``pyspark`` unimportable
instead, Sail falls back to Spark 3.5's settings and a PySpark 4.3 client's ``createDataFrame`` fails
("configuration not found: spark.sql.session.localRelationSizeLimit"): no way around it.
``SQLRP_SAIL_URL`` (``sc://host:port``) skips all this and uses a running server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the PySpark minor versions whose settings Sail 0.7.2 carries (its SparkRuntimeConfig)
KNOWN = ("3.", "4.0.", "4.1.", "4.2.")


class SailUnavailable(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pyspark_version(python: str) -> str | None:
    """The PySpark version importable by ``python``, else None; SailUnavailable without pysail."""
    probe = subprocess.run(
        [python, "-c", "import pysail, pyspark; print(pyspark.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if "pysail" in probe.stderr and probe.returncode != 0:
        raise SailUnavailable(f"no pysail for {python}: pip install pysail ({probe.stderr.strip()[-200:]})")
    return probe.stdout.strip() or None


class TempSail:
    """One Sail server in a temporary directory, on a free loopback port."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python or os.environ.get("SQLRP_SAIL_PYTHON") or sys.executable
        self.root = Path(tempfile.mkdtemp(prefix="sqlrp-sail-"))
        self.port = _free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        """Start the server and wait until its port accepts connections; its ``sc://`` URL."""
        version = _pyspark_version(self.python)
        if version is None or not version.startswith(KNOWN):
            raise SailUnavailable(
                f"Sail 0.7.2 refuses every session beside pyspark {version} ({self.python}): set SQLRP_SAIL_PYTHON "
                "to a Python with pysail and pyspark<4.3, or install pyspark<4.3 here"
            )
        log = self.root / "server.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [self.python, "-m", "pysail", "spark", "server", "--ip", "127.0.0.1", "--port", str(self.port)],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.time() + 60
        while True:
            if self.process.poll() is not None:
                text = log.read_text(errors="replace")[-800:]
                raise SailUnavailable(f"sail exited with code {self.process.returncode}: {text}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return f"sc://127.0.0.1:{self.port}"
            except OSError:
                if time.time() > deadline:
                    self.stop()
                    raise SailUnavailable("sail did not accept connections within 60 s") from None
                time.sleep(0.2)

    @property
    def warehouse(self) -> Path:
        """Where the server writes its tables' Parquet files."""
        return self.root / "spark-warehouse"

    def stop(self) -> None:
        """Stop the server (SIGTERM; SIGKILL after 30 s) and remove its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
