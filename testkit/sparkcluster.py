"""Start a throw-away Spark standalone cluster for the tests: one master and N workers from the
PySpark distribution (``<pyspark>/bin/spark-class``), every socket on 127.0.0.1.

The master and each worker are ``java`` processes that ``spark-class`` ``exec``s into, so the pid of
each ``Popen`` is the daemon itself; :meth:`SparkCluster.stop` ends exactly those pids (TERM, then
KILL) and removes the temporary folder that holds the workers' ``SPARK_WORKER_DIR``, the logs
(``SPARK_LOG_DIR``) and the scratch space (``SPARK_LOCAL_DIRS``) -- by default these would land in
site-packages.  :class:`SparkConnectServer` does the same for a Spark Connect server (``sc://``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

#: JVM options for short-lived test daemons and executors: the C1 compiler only and the serial
#: collector start a JVM faster on a 2-core machine (tests, not throughput)
FAST_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkClusterUnavailable(RuntimeError):
    """The cluster could not be started (no PySpark, no Java, or a daemon did not come up)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The PySpark distribution (holds ``bin/spark-class`` and ``jars/``)."""
    try:
        import pyspark
    except ImportError as exc:
        raise SparkClusterUnavailable(f"pyspark is not installed: {exc}") from None
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise SparkClusterUnavailable(f"no bin/spark-class in {home}")
    return home


class SparkCluster:
    """A standalone master and ``workers`` workers (``cores`` cores, ``memory`` each) on loopback."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.home = spark_home()
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise SparkClusterUnavailable("no java on PATH and no JAVA_HOME")
        self.workers, self.cores, self.memory = workers, cores, memory
        self.root = Path(tempfile.mkdtemp(prefix="sqlrp-sparkcluster-"))
        self.port = free_port()
        self.webui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []
        for name in ("work", "logs", "local", "pids", "conf"):
            (self.root / name).mkdir()
        # read by the daemons and by any spark-submit started with this environment (env())
        (self.root / "conf" / "spark-defaults.conf").write_text(f"spark.executor.extraJavaOptions {FAST_START}\n")

    def env(self) -> dict[str, str]:
        """The environment of the daemons (and of a client that should read ``conf/``)."""
        return self._env()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_WORKER_DIR=str(self.root / "work"),
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_LOCAL_DIRS=str(self.root / "local"),
            SPARK_PID_DIR=str(self.root / "pids"),
            SPARK_NO_DAEMONIZE="1",
            SPARK_CONF_DIR=str(self.root / "conf"),
            SPARK_DAEMON_JAVA_OPTS=FAST_START,
        )
        return env

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.root / "logs" / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
        try:
            proc = subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                cwd=self.root,
            )
        finally:
            log.close()
        self.processes.append(proc)
        return proc

    def start(self, timeout: float = 60.0) -> str:
        """Start the master and the workers; return the master URL once every worker is ALIVE."""
        deadline = time.monotonic() + timeout
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        )
        self._wait(lambda: self._state() is not None, deadline, "the master's web UI")
        for i in range(self.workers):
            self._spawn(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(self.root / "work" / f"worker{i}"),
                self.url,
            )
        self._wait(lambda: self.alive_workers() >= self.workers, deadline, f"{self.workers} workers to register")
        return self.url

    def _state(self) -> dict | None:
        """The master's status (its web UI's ``/json/``), or None while it is not up."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        state = self._state() or {}
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def _wait(self, ready, deadline: float, what: str) -> None:  # noqa: ANN001 - a predicate
        while time.monotonic() < deadline:
            dead = [p for p in self.processes if p.poll() is not None]
            if dead:
                raise SparkClusterUnavailable(f"a Spark daemon exited ({dead[0].args[1]}): {self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise SparkClusterUnavailable(f"timed out waiting for {what}: {self.logs()}")

    def logs(self, tail: int = 1500) -> str:
        """The end of every daemon's output (for error messages)."""
        parts = []
        for path in sorted((self.root / "logs").glob("*.out")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """End the processes this cluster started, by pid (workers first), and remove the folder."""
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.processes):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.processes.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SparkCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SparkConnectServer:
    """A Spark Connect server (``SparkConnectServer`` through ``spark-submit``, ``local[2]`` inside)
    listening on 127.0.0.1 only; its warehouse, scratch space and logs in a temporary folder."""

    def __init__(self) -> None:
        self.home = spark_home()
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise SparkClusterUnavailable("no java on PATH and no JAVA_HOME")
        self.root = Path(tempfile.mkdtemp(prefix="sqlrp-sparkconnect-"))
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> str:
        """Start the server; return its ``sc://`` URL once its port accepts connections."""
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.warehouse.dir": (self.root / "warehouse").as_uri(),
            "spark.local.dir": str(self.root / "local"),
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.extraJavaOptions": f"{FAST_START} -Dderby.system.home={self.root / 'derby'}",
        }
        command = [
            str(self.home / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name",
            "sqlrp-connect",
            "--master",
            "local[2]",
        ]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        env = dict(os.environ, SPARK_HOME=str(self.home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(self.root))
        with open(self.root / "server.out", "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.root
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SparkClusterUnavailable(f"the Spark Connect server exited: {self.logs()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self.url
            time.sleep(0.5)
        raise SparkClusterUnavailable(f"timed out waiting for the Spark Connect server: {self.logs()}")

    def logs(self, tail: int = 3000) -> str:
        path = self.root / "server.out"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def stop(self) -> None:
        """End the server by its pid (TERM, then KILL) and remove the folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
