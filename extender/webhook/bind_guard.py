"""Checks on /bind before any call to the API server.

Anyone who can reach /bind could otherwise place any pending pod on any node.
So a bind must name a pod we know, unchanged (UID), unbound, of a scheduler we
serve, in an allowed namespace, and a node that exists, is Ready, is not
cordoned, and passes the policy for this pod right now.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.runtime import Runtime
from extender.settings import Settings
from extender.wire import BindingArgs


@dataclass(frozen=True, slots=True)
class Refusal:
    code: str  # metric label
    message: str


def refuse_bind(runtime: Runtime, settings: Settings, args: BindingArgs) -> Refusal | None:
    """The first reason to refuse this bind, or None when it may go ahead."""
    key = f"{args.pod_namespace}/{args.pod_name}"
    if settings.namespaces_allow and args.pod_namespace not in settings.namespaces_allow:
        return Refusal("namespace-denied", f"namespace {args.pod_namespace} is not in the bind allow list")
    if args.pod_namespace in settings.namespaces_deny:
        return Refusal("namespace-denied", f"namespace {args.pod_namespace} is in the bind deny list")
    record = runtime.state.pod(key)
    if record is None:
        return Refusal("pod-unknown", f"pod {key} is not known to the extender")
    if record.uid != args.pod_uid:
        return Refusal("uid-mismatch", f"pod {key} was recreated (UID mismatch: request {args.pod_uid}, "
                                       f"cluster {record.uid})")
    if record.node_name and not record.assumed:
        return Refusal("already-bound", f"pod {key} is already assigned to node {record.node_name}")
    if record.scheduler_name not in settings.scheduler_names:
        return Refusal("scheduler-not-served", f"pod {key} has schedulerName {record.scheduler_name}, "
                                               "which this extender does not serve")
    info = runtime.state.node_info(args.node)
    if info is None:
        return Refusal("node-unknown", f"node {args.node} does not exist")
    if not info.node.ready:
        return Refusal("node-not-ready", f"node {args.node} is not Ready")
    if info.node.unschedulable:
        return Refusal("node-cordoned", f"node {args.node} is cordoned (unschedulable)")
    if record.view is None:
        return Refusal("pod-unknown", f"pod {key} has no pending spec in the extender's state")
    decision = runtime.engine.filter(record.view, [info])
    status = decision.failed.get(args.node)
    if status is not None:
        return Refusal("policy", f"node {args.node} does not pass the policy for pod {key}: {status.reason}")
    return None
