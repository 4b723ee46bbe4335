"""The ways a custom scheduler fails silently, broken on purpose on a real node: each must show
where a user looks (the pod's status and logs, Events, metrics) and not as a pod Pending forever.

The chart is installed standalone-only, one replica, with the README's local-node command:

- the ClusterRole without ``create`` on ``pods/binding``: at start-up the preflight refuses to
  start, naming the permission and the ``kubectl auth can-i`` line; taken away while it runs,
  the first bind reports it (an Event on the pod naming the permission, and
  ``extender_bind_errors_total{reason="403"}``), and the pod is bound once it is given back;
- no ServiceAccount token mounted: the container exits at once with a line saying so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e import chartnode as chart
from tests.e2e.chartnode import NAMESPACE, STANDALONE

pytestmark = [pytest.mark.e2e, pytest.mark.node]

CLUSTER_ROLE = "scheduler-extender-standalone"
BINDING_RULE = {"apiGroups": [""], "resources": ["pods/binding", "bindings"], "verbs": ["create"]}


# The chart's values for this module (the chart_release fixture, tests/e2e/conftest.py).
CHART_VALUES = ("--set", "webhook.enabled=false", "--set", "kubeScheduler.enabled=false", "--set", "standalone.replicas=1")


@pytest.fixture
def cluster(chart_release: Any, node: Any) -> Any:
    return chart_release


def set_binding_rule(cluster: Any, present: bool) -> None:
    role = cluster.client.call("GET", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{CLUSTER_ROLE}")
    rules = [r for r in role["rules"] if r != BINDING_RULE]
    assert present or len(rules) == len(role["rules"]) - 1, f"no binding rule in {role['rules']}"
    role["rules"] = [*rules, BINDING_RULE] if present else rules
    cluster.client.call("PUT", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{CLUSTER_ROLE}", role)


def scheduler_pod(cluster: Any) -> dict[str, Any]:
    (pod,) = chart.component_pods(cluster, STANDALONE)
    return pod


def container_logs(cluster: Any, pod: str) -> str:
    """The container's log, of its last terminated run and of the current one (kubelet's
    files; the first run's may be all there is while it waits to restart)."""
    def wanted() -> str:
        runs = [cluster.kubectl("logs", "-n", NAMESPACE, pod, *flag, check=False).stdout
                for flag in (["--previous"], [])]  # fmt: skip
        return "\n".join(runs).strip()

    return cluster.wait_for(wanted, timeout=20, message=f"the logs of {pod}")


def terminated(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    """The container's last termination (exit code, times), if it has exited."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        state = status.get("lastState", {}).get("terminated") or status.get("state", {}).get("terminated")
        if state:
            return dict(state)
    return None


def test_without_bind_permission_the_scheduler_refuses_to_start(cluster: Any) -> None:
    set_binding_rule(cluster, present=False)
    try:
        old = scheduler_pod(cluster)["metadata"]["name"]
        cluster.client.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{old}")
        pod = cluster.wait_for(
            lambda: next((p for p in chart.component_pods(cluster, STANDALONE)
                          if p["metadata"]["name"] != old and terminated(p)), None),
            timeout=60, message="the new scheduler pod's container to exit")  # fmt: skip
        state = terminated(pod)
        assert state is not None and state["exitCode"] == 1, state
        assert not chart.pod_ready(cluster.pod(NAMESPACE, pod["metadata"]["name"]))
        logs = container_logs(cluster, pod["metadata"]["name"])
        assert "lacks permissions it needs and will not start" in logs, logs
        assert "create pods/binding cluster-wide" in logs, logs
        assert ("kubectl auth can-i create pods --subresource=binding --all-namespaces "
                f"--as=system:serviceaccount:{NAMESPACE}:{STANDALONE}") in logs, logs  # fmt: skip
    finally:
        set_binding_rule(cluster, present=True)
    # Given back, the next start passes (deleting the pod skips the crash-loop back-off).
    deleted = [p["metadata"]["name"] for p in chart.component_pods(cluster, STANDALONE)]
    for name in deleted:
        cluster.client.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    # Each deleted replica exits on SIGTERM well within its 30 s grace period, even one deleted
    # as its container (re)started: the image's PID 1 is tini, which passes the signal on while
    # Python still imports (test_image_on_node.py). And it must be gone before the next test:
    # a terminating replica could still lead and bind.
    cluster.wait_for(lambda: not any(cluster.pod(NAMESPACE, name) for name in deleted), timeout=25,
                     message=f"the deleted scheduler pods {deleted} gone")
    chart.wait_rolled_out(cluster, timeout=90)


def test_bind_permission_lost_while_running_is_reported_at_the_first_bind(cluster: Any) -> None:
    chart.wait_rolled_out(cluster)

    def forbidden_binds() -> float:
        return sum(chart.metric(chart.scrape(p["status"]["podIP"], 10251), "extender_bind_errors_total", reason="403")
                   for p in chart.component_pods(cluster, STANDALONE) if p["status"].get("podIP"))  # fmt: skip

    errors_before = forbidden_binds()
    set_binding_rule(cluster, present=False)
    try:
        # RBAC changes apply at once; the scheduler finds out at its next bind.
        chart.app_pod(cluster, "no-bind", STANDALONE)
        message = cluster.wait_for(
            lambda: next((m for m in chart.event_messages(cluster, "no-bind") if "forbidden" in m), None),
            timeout=60, message="an Event on the pod saying the bind was forbidden")  # fmt: skip
        assert "pods/binding" in message and f"system:serviceaccount:{NAMESPACE}:{STANDALONE}" in message, message
        try:
            cluster.wait_for(lambda: forbidden_binds() > errors_before, timeout=15,
                             message='extender_bind_errors_total{reason="403"} counting it')
        except AssertionError as exc:
            samples = {p["metadata"]["name"]: [line for line in chart.scrape(p["status"]["podIP"], 10251).splitlines()
                                               if line.startswith(("extender_bind", "extender_leader"))]
                       for p in chart.component_pods(cluster, STANDALONE)}  # fmt: skip
            pods = [(p["metadata"]["name"], p["metadata"].get("deletionTimestamp"),
                     [(c["state"], c.get("restartCount")) for c in p["status"].get("containerStatuses", [])])
                    for p in cluster.pods(NAMESPACE)]
            raise AssertionError(f"{exc}: before {errors_before}, {samples}, lease {chart.lease_holder(cluster)}, "
                                 f"event {message}, pods {pods}") from None
        assert not (cluster.pod(chart.APPS, "no-bind") or {})["spec"].get("nodeName")
    finally:
        set_binding_rule(cluster, present=True)
    # The pod is retried (back-off) and bound once the permission is back.
    assert chart.wait_started(cluster, "no-bind", timeout=90)["spec"]["nodeName"] == cluster.node.name


def test_without_a_service_account_token_the_start_fails_at_once(cluster: Any) -> None:
    patch = {"spec": {"template": {"spec": {"automountServiceAccountToken": False}}}}
    cluster.kubectl("patch", "-n", NAMESPACE, f"deployment/{STANDALONE}", "--type=merge", "-p", json.dumps(patch))
    try:
        pod = cluster.wait_for(
            lambda: next((p for p in chart.component_pods(cluster, STANDALONE)
                          if p["spec"].get("automountServiceAccountToken") is False and terminated(p)), None),
            timeout=60, message="the token-less pod's container to exit")  # fmt: skip
        state = terminated(pod)
        assert state is not None and state["exitCode"] == 1, state
        logs = container_logs(cluster, pod["metadata"]["name"])
        assert "no ServiceAccount token at /var/run/secrets/kubernetes.io/serviceaccount/token" in logs, logs
        assert "automountServiceAccountToken" in logs and "Traceback" not in logs, logs
    finally:
        cluster.kubectl("rollout", "undo", "-n", NAMESPACE, f"deployment/{STANDALONE}")
    chart.wait_rolled_out(cluster, timeout=90)
