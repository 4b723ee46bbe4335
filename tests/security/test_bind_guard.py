"""Every /bind refusal: HTTP 200 with {"Error": reason}, a log line, a metric, and no API call.

The snapshot (config/snapshot.yaml): node-1..3 Ready, gpu-1 tainted dedicated=gpu:NoSchedule,
node-4 cordoned, node-5 NotReady; pending pods default/pod-cache-true, default/pod-cache-false,
ml/trainer-1 (gpu toleration + nodeSelector accelerator=nvidia-a100), default/huge (12 CPU);
default/web-6d4b9c7f5-abcde runs on node-1.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.security.conftest import Webhook

POD_UID = "8da720d6-bcf1-4d17-9de5-656751f4a11b"  # default/pod-cache-true
TRAINER_UID = "a1b2c3d4-0006-4000-8000-000000000006"
HUGE_UID = "a1b2c3d4-0007-4000-8000-000000000007"
WEB_UID = "a1b2c3d4-0002-4000-8000-000000000002"


def bind_args(name: str = "pod-cache-true", node: str = "node-1", uid: str = POD_UID,
              namespace: str = "default") -> dict[str, str]:
    return {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}


def bind_count(result: str) -> float:
    return REGISTRY.get_sample_value("extender_bind_total", {"result": result}) or 0.0


def assert_refused(hook: Webhook, body: dict[str, Any], code: str, *needles: str,
                   caplog: pytest.LogCaptureFixture) -> str:
    before = bind_count(code)
    with caplog.at_level(logging.WARNING, logger="extender.webhook.verbs"):
        resp = hook.client.post("/bind", json=body)
    assert resp.status_code == 200, resp.data
    reply = resp.get_json()
    assert set(reply) == {"Error"} and reply["Error"], reply
    for needle in needles:
        assert needle in reply["Error"], reply["Error"]
    assert bind_count(code) == before + 1, f"extender_bind_total{{result={code!r}}} did not move"
    assert any("refused bind" in r.getMessage() and reply["Error"] in r.getMessage() for r in caplog.records)
    assert hook.binder.calls == [], "a refused bind reached the binder"
    return reply["Error"]


def assert_bound(hook: Webhook, body: dict[str, Any]) -> None:
    before = bind_count("bound")
    resp = hook.client.post("/bind", json=body)
    assert resp.status_code == 200 and resp.get_json() == {"Error": ""}, resp.data
    assert hook.binder.calls == [(body["PodNamespace"], body["PodName"], body["PodUID"], body["Node"])]
    assert bind_count("bound") == before + 1
    record = hook.runtime.state.pod(f"{body['PodNamespace']}/{body['PodName']}")
    assert record is not None and record.node_name == body["Node"]


# ---- the success cases (so that each refusal below is the check's doing) --------------


def test_success(webhook: Webhook) -> None:
    assert_bound(webhook, bind_args())


def test_success_gpu_pod_on_the_gpu_node(webhook: Webhook) -> None:
    assert_bound(webhook, bind_args("trainer-1", "gpu-1", TRAINER_UID, "ml"))


def test_second_bind_of_the_same_pod_is_refused(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_bound(webhook, bind_args())
    webhook.binder.calls.clear()
    assert_refused(webhook, bind_args(node="node-2"), "already-bound", "already assigned to node node-1",
                   caplog=caplog)


# ---- the pod -----------------------------------------------------------------------


def test_unknown_pod(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args("no-such-pod"), "pod-unknown", "default/no-such-pod", "not known",
                   caplog=caplog)


def test_uid_mismatch(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args(uid="00000000-dead-beef-0000-000000000000"), "uid-mismatch",
                   "UID mismatch", POD_UID, caplog=caplog)


def test_empty_uid_is_a_mismatch(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args(uid=""), "uid-mismatch", "UID mismatch", caplog=caplog)


def test_already_bound(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args("web-6d4b9c7f5-abcde", "node-2", WEB_UID), "already-bound",
                   "already assigned to node node-1", caplog=caplog)


def test_bind_in_flight_is_refused(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    # An assumed pod: a bind we issued that the watch has not confirmed yet.
    webhook.runtime.state.assume("default/pod-cache-true", "node-2", uid=POD_UID)
    assert_refused(webhook, bind_args(node="node-3"), "already-bound", "already being bound to node node-2",
                   caplog=caplog)


def test_scheduler_name_not_served(webhook_factory: Callable[..., Webhook],
                                   caplog: pytest.LogCaptureFixture) -> None:
    hook = webhook_factory(scheduler_names=("extender-kube-scheduler",))
    assert_refused(hook, bind_args(), "scheduler-not-served", "schedulerName default-scheduler", caplog=caplog)


@pytest.mark.parametrize(
    ("section", "field", "value", "code", "needle"),
    [
        ("spec", "schedulerName", "someone-elses-scheduler", "scheduler-not-served", "someone-elses-scheduler"),
        ("metadata", "deletionTimestamp", "2026-11-29T19:30:00Z", "pod-deleting", "being deleted"),
        ("spec", "schedulingGates", [{"name": "example.com/quota"}], "pod-gated", "scheduling gates"),
    ],
    ids=["pod-of-another-scheduler", "pod-being-deleted", "gated-pod"],
)
def test_a_pod_that_is_not_ours_to_bind(webhook: Webhook, snapshot_objects: dict[str, Any],
                                        caplog: pytest.LogCaptureFixture, section: str, field: str, value: Any,
                                        code: str, needle: str) -> None:
    pod = copy.deepcopy(snapshot_objects["Pod/default/pod-cache-true"])
    pod[section][field] = value
    webhook.runtime.state.upsert_pod(pod)
    assert_refused(webhook, bind_args(), code, needle, caplog=caplog)


def test_namespace_not_in_allow_list(webhook_factory: Callable[..., Webhook],
                                     caplog: pytest.LogCaptureFixture) -> None:
    hook = webhook_factory(namespaces_allow=("ml",))
    assert_refused(hook, bind_args(), "namespace-denied", "namespace default", "allow list", caplog=caplog)
    assert_bound(hook, bind_args("trainer-1", "gpu-1", TRAINER_UID, "ml"))  # the allowed one still binds


def test_namespace_in_deny_list(webhook_factory: Callable[..., Webhook], caplog: pytest.LogCaptureFixture) -> None:
    hook = webhook_factory(namespaces_deny=("default", "kube-system"))
    assert_refused(hook, bind_args(), "namespace-denied", "namespace default", "deny list", caplog=caplog)
    assert_bound(hook, bind_args("trainer-1", "gpu-1", TRAINER_UID, "ml"))


# ---- the node ----------------------------------------------------------------------


def test_unknown_node(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args(node="node-9"), "node-unknown", "node node-9 does not exist", caplog=caplog)


def test_node_names_are_exact(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args(node="node-1."), "invalid-name", "not a valid node name", caplog=caplog)


def test_not_ready_node(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args(node="node-5"), "node-not-ready", "node node-5 is not Ready", caplog=caplog)


def test_cordoned_node(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args(node="node-4"), "node-cordoned", "node node-4 is cordoned", caplog=caplog)


def test_cordoned_node_takes_pods_tolerating_it(webhook: Webhook, snapshot_objects: dict[str, Any]) -> None:
    """As kube-scheduler's NodeUnschedulable: DaemonSet pods tolerate the unschedulable taint."""
    pod = copy.deepcopy(snapshot_objects["Pod/default/pod-cache-true"])
    pod["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                   "effect": "NoSchedule"}]
    webhook.runtime.state.upsert_pod(pod)
    assert_bound(webhook, bind_args(node="node-4"))


def test_node_without_room(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args("huge", "node-1", HUGE_UID), "node-unfit", "node node-1",
                   "Insufficient cpu", caplog=caplog)


def test_node_with_an_untolerated_taint(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args("huge", "gpu-1", HUGE_UID), "node-unfit", "untolerated taint",
                   caplog=caplog)


def test_node_not_matching_the_node_selector(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    assert_refused(webhook, bind_args("trainer-1", "node-1", TRAINER_UID, "ml"), "node-unfit", "node node-1",
                   "affinity", caplog=caplog)


def test_node_failing_the_configured_policy(webhook: Webhook, snapshot_objects: dict[str, Any],
                                            caplog: pytest.LogCaptureFixture) -> None:
    """The webhook policy's NodeReady refuses pressure conditions; /bind applies it too."""
    node = copy.deepcopy(snapshot_objects["Node/node-2"])
    for condition in node["status"]["conditions"]:
        if condition["type"] == "MemoryPressure":
            condition["status"] = "True"
    webhook.runtime.state.upsert_node(node)
    assert_refused(webhook, bind_args(node="node-2"), "policy", "does not pass the policy", "node-2",
                   caplog=caplog)


# ---- the request and the extender ---------------------------------------------------------


def test_names_that_are_not_kubernetes_names(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing that could not be a pod or node name is looked up, or echoed raw into the log."""
    error = assert_refused(webhook, bind_args("pod\nFAKE 2026 WARNING forged log line"), "invalid-name",
                           "not a valid pod name", caplog=caplog)
    assert "\n" not in error
    assert_refused(webhook, bind_args(namespace="Default"), "invalid-name", "not a valid namespace", caplog=caplog)
    assert_refused(webhook, bind_args(uid="a uid with spaces"), "invalid-name", "not a valid UID", caplog=caplog)


def test_state_not_synced(webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    webhook.runtime.state.pods_synced = False
    assert_refused(webhook, bind_args(), "not-ready", "not synced", caplog=caplog)


def test_bind_disabled(webhook_factory: Callable[..., Webhook], caplog: pytest.LogCaptureFixture) -> None:
    hook = webhook_factory(enable_bind=False)
    assert_refused(hook, bind_args(), "disabled", "bind is disabled", caplog=caplog)


def test_refusals_change_nothing(webhook: Webhook) -> None:
    state = webhook.runtime.state
    before = {info.name: (dict(info.requested), info.pod_count) for info in state.all_node_infos()}
    for body in (bind_args(node="node-5"), bind_args("huge", "node-1", HUGE_UID), bind_args(uid="x")):
        assert webhook.client.post("/bind", json=body).get_json()["Error"]
    assert {info.name: (dict(info.requested), info.pod_count) for info in state.all_node_infos()} == before
    assert state.pod("default/pod-cache-true").node_name == ""
    assert webhook.binder.calls == []
