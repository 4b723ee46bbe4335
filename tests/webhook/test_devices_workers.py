"""Several gunicorn workers, each with its own cluster state, binding GPU pods at the same time.

A real `extender serve --workers 3` against the API server: a burst of concurrent /bind calls
lands on different workers, none of which sees the others' binds until its watch delivers
them. The device ledger must keep the assignments within every device's capacity, and once
kube-scheduler-like retries are done, the devices must be exactly full.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import requests

from extender.kube.deviceledger import LEDGER_ANNOTATION
from tests.devicebuilders import create_ready_node, device_totals, gpu, gpu_limits
from tests.helpers import ROOT
from tests.reliability.servers import launch, wait_until

pytestmark = pytest.mark.apiserver

LEDGER_NAMESPACE = "gpu-ledgers"
POLICY = ROOT / "config" / "policy-webhook-devices.yaml"
PODS = 12
WORKERS = 3
TRANSIENT = ("not synced", "not known to the extender", "kept changing", "handed out by another")


def _bind(url: str, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": "default", "PodUID": meta["uid"], "Node": "gpu-1"}
    with requests.Session() as session:  # a fresh connection: gunicorn hands it to any worker
        reply = session.post(f"{url}/bind", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["Error"])


def _all_workers_synced(url: str) -> bool:
    """extender_cache_synced is the minimum over the live workers (multiprocess mode)."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    return any(line.startswith("extender_cache_synced ") and float(line.split()[1]) == 1.0
               for line in text.splitlines())


def test_workers_never_hand_out_the_same_share(apiserver: Any, kube: Any) -> None:
    kube.ensure_namespace(LEDGER_NAMESPACE)
    create_ready_node(kube, "gpu-1", [gpu("GPU-0", 16000), gpu("GPU-1", 16000)])
    pods = [kube.create_pod(f"w{i}", limits=gpu_limits(memory=5000, cores=10)) for i in range(PODS)]
    # Sync workers (one thread) take one connection at a time, so a burst is spread over every
    # worker (one gthread worker may accept them all). The ledger does not depend on the worker class.
    server = launch(["--source", "kube", "--kubeconfig", str(apiserver.kubeconfig), "--policy", str(POLICY),
                     "--lease-namespace", LEDGER_NAMESPACE, "--threads", "1", "--log-level", "WARNING"], workers=WORKERS,
                    env={"EXTENDER_WORKER_CLASS": "sync"})
    try:
        assert wait_until(lambda: _all_workers_synced(server.url), timeout=30), "workers did not all sync"
        if apiserver.fake is not None:
            # Slow Bindings keep each worker busy, so the burst must be shared by all of them,
            # and every worker binds before any watch shows it the others' pods.
            apiserver.fake.delay(0.3, path_regex=r"/binding$", method="POST")
        errors: dict[str, str] = {}
        start = threading.Barrier(PODS)

        def burst(pod: dict[str, Any]) -> None:
            start.wait()
            error = _bind(server.url, pod)
            deadline = time.monotonic() + 20
            while any(t in error for t in TRANSIENT) and time.monotonic() < deadline:
                time.sleep(0.1)  # a worker still listing, or a share taken meanwhile: retry
                error = _bind(server.url, pod)
            errors[pod["metadata"]["name"]] = error

        threads = [threading.Thread(target=burst, args=(pod,)) for pod in pods]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(errors) == PODS

        bound = [p for p in kube.list_pods("default") if p["spec"].get("nodeName")]
        totals = device_totals(bound)
        assert all(memory <= 16000 and cores <= 100 for memory, cores, _ in totals.values()), totals
        # Three 5000 MiB shares fit on each 16000 MiB device: exactly six pods, none twice.
        assert len(bound) == 6 and totals == {"gpu-1/GPU-0": (15000, 30, 3), "gpu-1/GPU-1": (15000, 30, 3)}
        refused = [e for e in errors.values() if e]
        assert len(refused) == PODS - 6
        assert all("Insufficient GPU memory" in e for e in refused), refused
        # The ledger says who handed out each share: more than one worker did (else nothing was tested).
        lease = kube.get_lease("gpu-ledger.gpu-1", LEDGER_NAMESPACE)
        entries = json.loads(lease["metadata"]["annotations"][LEDGER_ANNOTATION])["entries"]
        writers = {entry["by"].split("/")[1] for entry in entries.values()}  # host/pid/random: the pid
        if apiserver.fake is not None:
            assert len(writers) >= 2, f"every bind went to one worker ({writers}): the test proved nothing"
    finally:
        code = server.stop()
    output = server.output()
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
