"""The chart installed as a user installs it, on a real node (tests.e2e.node), and used.

One release for the module, installed with the README's "Trying it on a local node" command;
the tests run in file order on it (each leaves the release as it found it) and the last one
uninstalls it: the webhook's pods Ready through their own probes, ``/metrics`` through the
Service, the chart's second kube-scheduler binding through the webhook's Service, the
standalone scheduler's leader election, bind and failover, ``helm test``, the containers'
security as the kernel sees it, the ServiceAccounts' RBAC, a node going NotReady and coming
back, the webhook down (``ignorable``), an upgrade with a new policy under load, and
``helm uninstall``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from extender.checks.permissions import SERVICE_ACCOUNTS, required_permissions, service_account_user
from tests.e2e import chartnode as chart
from tests.e2e.chartnode import APPS, KUBE_SCHEDULER, NAMESPACE, STANDALONE, WEBHOOK
from tests.e2e.nodecluster import pod_ready

pytestmark = [pytest.mark.e2e, pytest.mark.node]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "wire" / "filter-request.json"


# The chart's values for this module (the chart_release fixture, tests/e2e/conftest.py).
CHART_VALUES = ()


@pytest.fixture
def cluster(chart_release: Any, node: Any) -> Any:
    """The node cluster with the release installed; daemon logs shown on failure."""
    return chart_release


def test_webhook_pods_are_ready_through_their_probes(cluster: Any) -> None:
    pods = chart.component_pods(cluster, WEBHOOK)
    assert len(pods) == 2 and all(pod_ready(p) for p in pods), chart.describe(cluster)
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["started"] and status["restartCount"] == 0
        assert pod["spec"]["nodeName"] == cluster.node.name
    # The Service's endpoints are those two pods, ready.
    slices = cluster.client.call("GET", f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
                                        f"?labelSelector=kubernetes.io/service-name={WEBHOOK}")["items"]
    ready = {e["addresses"][0] for s in slices for e in s.get("endpoints") or [] if e["conditions"].get("ready")}
    assert ready == {p["status"]["podIP"] for p in pods}


def test_metrics_through_the_service(cluster: Any) -> None:
    text = chart.scrape(chart.service_ip(cluster))
    assert chart.metric(text, "extender_cache_synced") == 1  # its watches listed this cluster
    assert chart.metric(text, "extender_cache_objects", kind="node") == 1


def test_second_kube_scheduler_binds_through_the_webhook_service(cluster: Any) -> None:
    filters = chart.webhook_metric(cluster, "extender_requests_total", verb="filter")
    binds = chart.webhook_metric(cluster, "extender_bind_total", result="bound")
    chart.app_pod(cluster, "via-webhook", KUBE_SCHEDULER)
    pod = chart.wait_started(cluster, "via-webhook")
    assert pod["spec"]["nodeName"] == cluster.node.name
    # kube-scheduler asked the webhook (through extender-webhook.<ns>.svc) and let it bind.
    assert chart.webhook_metric(cluster, "extender_requests_total", verb="filter") > filters
    assert chart.webhook_metric(cluster, "extender_bind_total", result="bound") == binds + 1
    assert any("Scheduled" in m for m in chart.event_messages(cluster, "via-webhook"))


def test_standalone_scheduler_leader_binds_and_fails_over(cluster: Any) -> None:
    pods = {p["metadata"]["name"] for p in chart.component_pods(cluster, STANDALONE)}
    leader = cluster.wait_for(lambda: (h := chart.lease_holder(cluster)) in pods and h, timeout=30,
                              message="a standalone replica holding the lease")
    chart.app_pod(cluster, "standalone-1", STANDALONE)
    assert chart.wait_started(cluster, "standalone-1")["spec"]["nodeName"] == cluster.node.name

    # Kill the leader's pod: another replica (the survivor, or the Deployment's replacement)
    # takes the lease and binds the next pod.
    cluster.client.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{leader}")
    new_leader = cluster.wait_for(lambda: (h := chart.lease_holder(cluster)) not in ("", leader) and h, timeout=40,
                                  message=f"another replica taking the lease from {leader}")
    assert new_leader in {p["metadata"]["name"] for p in chart.component_pods(cluster, STANDALONE)}
    chart.app_pod(cluster, "standalone-2", STANDALONE)
    assert chart.wait_started(cluster, "standalone-2")["spec"]["nodeName"] == cluster.node.name
    chart.wait_rolled_out(cluster)


def test_helm_test_posts_the_wire_fixture_to_filter(cluster: Any) -> None:
    filters = chart.webhook_metric(cluster, "extender_requests_total", verb="filter")
    result = cluster.helm("test", chart.RELEASE, "-n", NAMESPACE, "--timeout", "120s", check=False)
    assert result.returncode == 0, result.stderr + result.stdout[-3000:]
    assert "Phase:          Succeeded" in result.stdout
    # The test pod (deleted once it passed) got a 200 from /filter: the webhook counted it.
    assert chart.webhook_metric(cluster, "extender_requests_total", verb="filter") >= filters + 1


def test_containers_run_locked_down(cluster: Any) -> None:
    """Non-root, read-only root filesystem, no privilege escalation: from the pods' status and
    from /proc of each container's process on the node."""
    checked = []
    for name in (WEBHOOK, KUBE_SCHEDULER, STANDALONE):
        for pod in chart.component_pods(cluster, name):
            for status in pod["status"]["containerStatuses"]:
                assert "running" in status["state"], status
                pid = cluster.node.container_pid(status["containerID"])
                proc = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                            if ":\t" in line)  # fmt: skip
                uids = proc["Uid"].split()
                assert uids[0] != "0" and set(uids) == {"65532"}, f"{pod['metadata']['name']}: uid {uids}"
                assert proc["NoNewPrivs"].strip() == "1", "allowPrivilegeEscalation: false sets no_new_privs"
                assert int(proc["CapEff"], 16) == 0 and int(proc["CapBnd"], 16) == 0, "every capability dropped"
                assert proc["Seccomp"].strip() == "2", "RuntimeDefault seccomp filter"
                root = next(line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                            if line.split()[4] == "/")  # fmt: skip
                assert "ro" in root[5].split(","), f"root filesystem mounted {root[5]}"
                checked.append(pod["metadata"]["name"])
    assert len(checked) == 6


def can_i_list(cluster: Any, user: str) -> set[tuple[str, str, str]]:
    """(verb, group, resource[/subresource]) ``user`` may do in every namespace, from
    ``kubectl auth can-i --list --as`` (as an authenticated user)."""
    out = cluster.kubectl("auth", "can-i", "--list", "-n", "default", f"--as={user}",
                          "--as-group=system:authenticated").stdout
    found = set()
    for line in out.splitlines()[1:]:
        brackets = re.findall(r"\[[^\]]*\]", line)
        resource = line.split()[0] if line.split() else ""
        if len(brackets) < 3 or not resource or resource.startswith("["):
            continue  # a non-resource URL
        base, _, subresource = resource.partition("/")
        name, _, group = base.partition(".")
        name += f"/{subresource}" if subresource else ""
        for verb in brackets[-1].strip("[]").split():
            found.add((verb, group, name))
    return found


def test_service_accounts_can_do_what_extender_check_lists_and_no_more(cluster: Any) -> None:
    # What every authenticated user may do (system:basic-user, discovery) is left out of both.
    everyone = can_i_list(cluster, "system:e2e-nobody")
    for mode in ("webhook", "standalone"):
        account = SERVICE_ACCOUNTS[mode]
        want = {(p.verb, p.group, p.resource + (f"/{p.subresource}" if p.subresource else ""))
                for p in required_permissions(mode) if not p.namespaced} - everyone  # fmt: skip
        have = can_i_list(cluster, service_account_user(NAMESPACE, account)) - everyone
        assert have - want == set(), f"{account} may do more than `extender check` lists: {sorted(have - want)}"
        assert want - have == set(), f"{account} lacks: {sorted(want - have)}"


def test_node_not_ready_gets_no_new_pods_until_kubelet_returns(cluster: Any) -> None:
    node = cluster.node
    node.stop_kubelet()
    try:
        taints = cluster.wait_for(
            lambda: [t for t in (cluster.client.get_node(node.name)["spec"].get("taints") or [])
                     if t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoSchedule"],
            timeout=60, message="the node lifecycle controller tainting the node unreachable")  # fmt: skip
        assert taints
        chart.app_pod(cluster, "while-not-ready", STANDALONE)
        messages = cluster.wait_for(
            lambda: [m for m in chart.event_messages(cluster, "while-not-ready") if m.startswith("FailedScheduling")],
            timeout=30, message="a FailedScheduling Event")  # fmt: skip
        # The policy's NodeReady filter says it first; kube-scheduler would name the taint.
        assert any("not ready" in m or "node.kubernetes.io/unreachable" in m for m in messages), messages
        assert not (cluster.pod(APPS, "while-not-ready") or {})["spec"].get("nodeName")
    finally:
        node.start_kubelet()
    cluster.wait_for(node.ready, timeout=60, message="the node Ready again")
    pod = chart.wait_started(cluster, "while-not-ready", timeout=90)
    assert pod["spec"]["nodeName"] == node.name
    chart.wait_rolled_out(cluster)


def test_webhook_down_and_ignorable(cluster: Any) -> None:
    """ignorable: false (the chart's default): pods of the second kube-scheduler wait, with an
    Event saying why, until the webhook is back. ignorable: true: they are placed without it."""
    cluster.kubectl("scale", "-n", NAMESPACE, f"deployment/{WEBHOOK}", "--replicas=0")
    try:
        # Gone, not just terminating: kube-proxy still sends a Service's traffic to serving
        # terminating endpoints when there are no ready ones (the preStop sleep keeps them so).
        cluster.wait_for(lambda: not cluster.pods(NAMESPACE, f"app.kubernetes.io/name={WEBHOOK}"), timeout=90,
                         message="the webhook's pods gone")
        chart.app_pod(cluster, "webhook-down", KUBE_SCHEDULER)
        messages = cluster.wait_for(
            lambda: [m for m in chart.event_messages(cluster, "webhook-down") if m.startswith("FailedScheduling")],
            timeout=60, message="a FailedScheduling Event")  # fmt: skip
        assert not (cluster.pod(APPS, "webhook-down") or {})["spec"].get("nodeName")
        assert any("extender" in m.lower() for m in messages), messages
        print(f"\nwebhook down, ignorable false: {messages[0]}")
    finally:
        cluster.kubectl("scale", "-n", NAMESPACE, f"deployment/{WEBHOOK}", "--replicas=2")
        chart.wait_rolled_out(cluster)
    assert chart.wait_started(cluster, "webhook-down", timeout=90)["spec"]["nodeName"] == cluster.node.name
    chart.wait_rolled_out(cluster)

    chart.upgrade(cluster, "--set", "kubeScheduler.extender.ignorable=true")
    try:
        cluster.kubectl("scale", "-n", NAMESPACE, f"deployment/{WEBHOOK}", "--replicas=0")
        # Gone, not just terminating: kube-proxy still sends a Service's traffic to serving
        # terminating endpoints when there are no ready ones (the preStop sleep keeps them so).
        cluster.wait_for(lambda: not cluster.pods(NAMESPACE, f"app.kubernetes.io/name={WEBHOOK}"), timeout=90,
                         message="the webhook's pods gone")
        chart.app_pod(cluster, "webhook-ignored", KUBE_SCHEDULER)
        assert chart.wait_started(cluster, "webhook-ignored", timeout=60)["spec"]["nodeName"] == cluster.node.name
    finally:
        cluster.kubectl("scale", "-n", NAMESPACE, f"deployment/{WEBHOOK}", "--replicas=2")
        chart.upgrade(cluster, "--set", "kubeScheduler.extender.ignorable=false")


def filter_request(namespace: str, node: str) -> bytes:
    request = json.loads(FIXTURE.read_text())
    request["Pod"]["metadata"]["namespace"] = namespace
    request["NodeNames"] = [node]
    return json.dumps(request).encode()


def test_upgrade_with_a_new_policy_loses_no_request(cluster: Any) -> None:
    node = cluster.node.name
    url = f"http://{chart.service_ip(cluster)}:8888/filter"
    body = filter_request(APPS, node)
    outcomes: Counter[str] = Counter()
    stop, lock = threading.Event(), threading.Lock()

    def count(outcome: str) -> None:
        with lock:
            outcomes[outcome] += 1

    def load() -> None:
        session = requests.Session()
        while not stop.is_set():
            try:
                reply = session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=5)
                if reply.status_code != 200:
                    count(f"HTTP {reply.status_code}")
                else:
                    count("fits" if node in (reply.json().get("NodeNames") or []) else "refused")
            except requests.RequestException as exc:
                count(f"error {type(exc).__name__}")
            time.sleep(0.02)

    # The new policy: pods of APPS may not use nodes labelled with this node's hostname.
    policy = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "policy-webhook.yaml").read_text())
    for plugin in policy["filters"]:
        if plugin["name"] == "NodeLabels":
            plugin["args"] = {"rules": [{"namespaces": [APPS],
                                         "forbid": [{"label": "kubernetes.io/hostname", "values": [node]}]}]}
    policy_file = Path(cluster.node.workdir) / "policy-webhook-new.yaml"
    policy_file.write_text(yaml.safe_dump(policy))
    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        cluster.wait_for(lambda: outcomes["fits"] >= 10, timeout=30, message="requests served by the old policy")
        cluster.helm("upgrade", chart.RELEASE, str(chart.CHART), "-n", NAMESPACE, "--reuse-values",
                     "--set-file", f"policy.webhook={policy_file}")
        chart.wait_rolled_out(cluster)
        before = outcomes["refused"]
        cluster.wait_for(lambda: outcomes["refused"] >= before + 20, timeout=30,
                         message="requests served by the new policy")  # fmt: skip
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    lost = {k: v for k, v in outcomes.items() if k not in ("fits", "refused")}
    assert not lost, f"lost requests during the upgrade: {dict(outcomes)}"
    print(f"\nrequests during the upgrade: {dict(outcomes)}")
    # After the rollout every pod serves the new policy: soon 20 answers in a row all refuse. An
    # old pod still finishing its graceful shutdown keeps serving until kube-proxy drops it from
    # the Service's rules, which on a loaded machine lags the Deployment's status by a few seconds.
    last: Counter[str] = Counter()

    def twenty_refused() -> bool:
        last.clear()
        for _ in range(20):
            reply = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=5)
            last["fits" if node in (reply.json().get("NodeNames") or []) else "refused"] += 1
        return last == {"refused": 20}

    cluster.wait_for(twenty_refused, timeout=30, message="20 answers in a row from the new policy")
    assert last == {"refused": 20}


def test_uninstall_leaves_nothing(cluster: Any) -> None:
    chart.delete_namespace_pods(cluster)
    result = cluster.helm("uninstall", chart.RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
    assert "uninstalled" in result.stdout
    cluster.wait_for(lambda: not cluster.pods(NAMESPACE), timeout=90, message="the release's pods gone")
    kinds = ("all,configmaps,secrets,serviceaccounts,roles,rolebindings,leases,poddisruptionbudgets,"
             "networkpolicies,clusterroles,clusterrolebindings,customresourcedefinitions")
    left = cluster.kubectl("get", kinds, "-A", "-o", "name",
                           "-l", "app.kubernetes.io/part-of=scheduler-extender").stdout.split()
    assert left == [], left
    named = cluster.kubectl("get", "clusterroles,clusterrolebindings", "-o", "name").stdout.split()
    assert not [n for n in named if "scheduler-extender" in n or "extender-" in n], named
    # What is left in the namespace is what Kubernetes puts in every namespace, and the
    # leader-election Leases (the schedulers', not the chart's objects: see docs).
    leftover = cluster.kubectl("get", "all,configmaps,secrets,serviceaccounts,leases", "-n", NAMESPACE,
                               "-o", "name").stdout.split()
    expected = {"configmap/kube-root-ca.crt", "serviceaccount/default"}
    assert set(leftover) - expected <= {f"lease.coordination.k8s.io/{STANDALONE}",
                                        f"lease.coordination.k8s.io/{KUBE_SCHEDULER}"}, leftover

