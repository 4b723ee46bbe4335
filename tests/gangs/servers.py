"""The API servers the gang tests run on: the fake, or a real etcd + kube-apiserver v1.36.3 with
the gang gates on and Coscheduling's PodGroup CRD (deploy/components/podgroup-crd) served.

One definition for tests/gangs/test_podgroup_api.py (the API itself) and
tests/scheduler/test_gangs.py (the scheduler on it), so both check against the same server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.envtest import find_assets
from tests.fakeapi.fixtures import ApiServerHandle, running_envtest, running_fake

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "deploy" / "components" / "podgroup-crd" / "scheduling.x-k8s.io_podgroups.yaml"
GATES = ("--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true",
         "--runtime-config=scheduling.k8s.io/v1alpha2=true")
COSCHEDULING = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
SERVERS = ["fake", "kube-apiserver"]


def wait_served(client: KubeTestClient, path: str, timeout: float = 30.0) -> None:
    """Wait until ``path`` answers 200: a new CRD is served a moment after it is created."""
    deadline = time.monotonic() + timeout
    while client.request("GET", path).status_code != 200:
        assert time.monotonic() < deadline, f"{path} not served after {timeout}s"
        time.sleep(0.2)


@contextmanager
def gang_apiserver(kind: str, directory: Path) -> Iterator[ApiServerHandle]:
    """``kind`` (one of SERVERS) started in ``directory``; the real one is skipped, saying so,
    without the envtest binaries (KUBEBUILDER_ASSETS; CI builds none)."""
    if kind == "fake":
        with running_fake(directory) as handle:
            yield handle
        return
    assets = find_assets()
    if assets is None:
        pytest.skip("needs etcd and kube-apiserver v1.36 (KUBEBUILDER_ASSETS); CI builds none")
    with running_envtest(assets, GATES) as handle:
        handle.client.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           yaml.safe_load(CRD_FILE.read_text()))
        wait_served(handle.client, COSCHEDULING)
        yield handle
