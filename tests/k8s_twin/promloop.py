"""A real Prometheus on loopback, scraping stand-in exporters, with railplan's rendered rules.

The hardware boundary is dcgm-exporter: no GPU is here, so `Exporter` serves, over HTTP on
127.0.0.1, the series dcgm-exporter serves for the pods that hold GPUs (the labels it puts on
them: ``gpu``, ``Hostname``, ``GPU_I_ID``/``GPU_I_PROFILE`` on a MIG instance, the pod's
``namespace``/``pod``/``container``), and a second one serves the kube-state-metrics series the
KEDA query joins (``kube_pod_owner``, ``kube_replicaset_owner``), which only a cluster running
pods would produce. `Prometheus` runs Debian's ``prometheus`` with:

- a scrape job per exporter as the Prometheus operator would generate it from the rendered
  ServiceMonitor's endpoint (``honorLabels``, its ``relabelings``), the interval shortened to
  1 s so that a change is seen within seconds (the rendered endpoint says 15 s);
- the rendered PrometheusRules' groups as its rule files, evaluated every second.

`hpa_replicas` is what the HorizontalPodAutoscaler KEDA creates for the rendered
ScaledObject sets: its trigger is ``metricType: Value`` (the query is already a mean over the
Deployment's pods), for which the HPA's algorithm is ``desired = ceil(current x metric /
target)``, left unchanged within the 10 % tolerance, bounded by min/max replicas
(kubernetes.io, "Horizontal Pod Autoscaling", Algorithm details; keda.sh ScaledObject
specification, ``triggers[].metricType``). KEDA's operator itself (Go, its own module graph)
is not built: it would only pass the query's value to that HPA.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.k8s_twin.control_plane import free_port

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]
HPA_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance default


def series(name: str, value: float, **labels: str) -> Series:
    return {(name, tuple(sorted(labels.items()))): value}


def exposition(data: Series) -> str:
    """Prometheus' text format of `data`."""
    lines = []
    for (name, labels), value in sorted(data.items()):
        body = ",".join(f'{k}="{v}"' for k, v in labels)
        lines.append(f"{name}{{{body}}} {value!r}")
    return "\n".join(lines) + "\n"


class Exporter:
    """An HTTP server on loopback serving `data` at /metrics (set it any time)."""

    def __init__(self) -> None:
        self.data: Series = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exposition(owner.data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def scrape_job(name: str, port: int, endpoint: dict[str, Any]) -> dict[str, Any]:
    """The scrape config the Prometheus operator makes of a ServiceMonitor endpoint (1 s)."""
    relabel = [
        {k: v for k, v in r.items() if k in ("action", "regex")}
        for r in endpoint.get("relabelings", [])
    ]
    return {
        "job_name": name,
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "scrape_interval": "1s",
        "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
        "relabel_configs": relabel,
    }


class Prometheus:
    """A running Prometheus; `query` and `rules` read its HTTP API."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log

    def _get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant vector: [{metric, value: [time, "v"]}]."""
        data = self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """The one value of `expr` now, or None when it returns nothing."""
        result = self.query(expr)
        if not result:
            return None
        (only,) = result
        return float(only["value"][1])

    def rules(self) -> list[dict[str, Any]]:
        return [r for g in self._get("/api/v1/rules")["groups"] for r in g["rules"]]

    def alert_states(self) -> dict[str, str]:
        """Alerting rule -> its state (inactive, pending, firing), as the rules API says."""
        return {r["name"]: r["state"] for r in self.rules() if r["type"] == "alerting"}


@contextmanager
def running(
    workdir: Path, jobs: list[dict[str, Any]], rule_groups: list[dict[str, Any]]
) -> Iterator[Prometheus]:
    """Debian's prometheus on a free loopback port with `jobs` and the rule groups."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (Debian: apt-get install prometheus)"
    workdir.mkdir(parents=True, exist_ok=True)
    rules = workdir / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups}))
    config = workdir / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": jobs,
            }
        )
    )
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:
        _wait_ready(prom)
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(prom: Prometheus, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if prom.proc.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{prom.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"prometheus not ready within {timeout_s:.0f} s")


def hpa_replicas(current: int, metric: float, target: float, low: int, high: int) -> int:
    """The HPA's desired replicas for a ``Value`` metric (see the module docstring)."""
    ratio = metric / target
    desired = current if abs(ratio - 1.0) <= HPA_TOLERANCE else math.ceil(current * ratio)
    return max(low, min(high, desired))
