"""Checks on /bind before any call to the API server.

Anyone who can reach /bind could otherwise place any pending pod on any node, so a
bind must name, in valid Kubernetes names:

- a pod in an allowed namespace (allow list, then deny list), that the extender
  knows (its cluster state is synced), unchanged (the request's PodUID is the pod's
  UID), not bound and not already being bound by us, not being deleted, not gated,
  not finished, and whose schedulerName this extender serves;
- a node that exists now (exact name), is Ready and is not cordoned (unless the pod
  tolerates the `node.kubernetes.io/unschedulable` taint, as kube-scheduler's
  NodeUnschedulable plugin allows, which DaemonSet pods do);
- and the node must pass, for this pod and right now, both the configured policy's
  filters and kube-scheduler's own core filters (SchedulingGates, TaintToleration,
  NodeAffinity, ResourceFit). The webhook policy leaves those to kube-scheduler, but
  a forged /bind has been through no kube-scheduler at all. A core filter the policy
  also configures (e.g. ResourceFit with ignoredResources) runs with the policy's args.

The first failed check is the refusal: its `code` labels extender_bind_total, its
message goes back to kube-scheduler in `Error` (HTTP 200, as the protocol wants).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from extender.model import devices
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.policy import names
from extender.policy.builtin import NodeAffinity, ResourceFit, SchedulingGates, TaintToleration
from extender.policy.engine import Engine, Policy
from extender.policy.plugins import Named
from extender.settings import Settings
from extender.webhook.runtime import Runtime
from extender.wire import BindingArgs

# Names as the API server validates them: DNS-1123 subdomain (pods, nodes), label (namespaces).
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*\Z")
_NAMESPACE = re.compile(rf"{_LABEL}\Z")
_UID = re.compile(r"[!-~]{0,128}\Z")  # printable, no spaces: UIDs are UUIDs

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# kube-scheduler's filters that a pod must pass wherever it goes; stateless, built once.
_CORE_FILTERS: tuple[Named, ...] = (SchedulingGates(), TaintToleration(), NodeAffinity(), ResourceFit())


@dataclass(frozen=True, slots=True)
class Refusal:
    code: str  # metric label
    message: str


def _shown(value: str) -> str:
    """A request string safe to echo into a reply or a log line."""
    return repr(value[:80] + ("..." if len(value) > 80 else ""))


@functools.lru_cache(maxsize=16)
def _core_engine(configured: frozenset[str]) -> Engine:
    """The core filters the policy does not configure itself.

    With DeviceFit in the policy, the shared-device resources are its business (kube-scheduler
    is configured to ignore them: managedResources with ignoredByScheduler), so the core
    ResourceFit leaves them out instead of counting them against the node's allocatable.
    """
    core = [p for p in _CORE_FILTERS if p.name not in configured]
    if names.DEVICE_FIT in configured:
        core = [ResourceFit(ignored_resources=frozenset(devices.RESOURCES)) if isinstance(p, ResourceFit) else p
                for p in core]
    return Engine(Policy(filters=tuple(core), source="<bind guard core filters>"))


def _invalid_names(args: BindingArgs) -> Refusal | None:
    if not _NAMESPACE.match(args.pod_namespace) or len(args.pod_namespace) > 63:
        return Refusal("invalid-name", f"PodNamespace {_shown(args.pod_namespace)} is not a valid namespace name")
    if not _SUBDOMAIN.match(args.pod_name) or len(args.pod_name) > 253:
        return Refusal("invalid-name", f"PodName {_shown(args.pod_name)} is not a valid pod name")
    if not _SUBDOMAIN.match(args.node) or len(args.node) > 253:
        return Refusal("invalid-name", f"Node {_shown(args.node)} is not a valid node name")
    if not _UID.match(args.pod_uid):
        return Refusal("invalid-name", f"PodUID {_shown(args.pod_uid)} is not a valid UID")
    return None


def _tolerates_cordon(pod: PodView) -> bool:
    return any(t.tolerates(UNSCHEDULABLE_TAINT, "", "NoSchedule") for t in pod.tolerations)


def refuse_bind(runtime: Runtime, settings: Settings, args: BindingArgs) -> Refusal | None:
    """The first reason to refuse this bind, or None when it may go ahead."""
    if not settings.enable_bind:
        return Refusal("disabled", "bind is disabled on this extender")
    invalid = _invalid_names(args)
    if invalid is not None:
        return invalid
    key = f"{args.pod_namespace}/{args.pod_name}"
    if settings.namespaces_allow and args.pod_namespace not in settings.namespaces_allow:
        return Refusal("namespace-denied", f"namespace {args.pod_namespace} is not in the bind allow list")
    if args.pod_namespace in settings.namespaces_deny:
        return Refusal("namespace-denied", f"namespace {args.pod_namespace} is in the bind deny list")
    state = runtime.state
    if not state.ready:
        return Refusal("not-ready", "the extender's cluster state is not synced yet; retry shortly")

    record = state.pod(key)
    if record is None:
        return Refusal("pod-unknown", f"pod {key} is not known to the extender")
    if record.uid != args.pod_uid:
        return Refusal("uid-mismatch", f"pod {key} was recreated (UID mismatch: request {_shown(args.pod_uid)}, "
                                       f"cluster {record.uid})")
    if record.node_name:
        if record.assumed:
            return Refusal("already-bound", f"pod {key} is already being bound to node {record.node_name}")
        return Refusal("already-bound", f"pod {key} is already assigned to node {record.node_name}")
    if record.deleting:
        return Refusal("pod-deleting", f"pod {key} is being deleted")
    if record.gated:
        return Refusal("pod-gated", f"pod {key} still has scheduling gates")
    if record.phase in TERMINAL_PHASES:
        return Refusal("pod-finished", f"pod {key} has finished (phase {record.phase})")
    if record.scheduler_name not in settings.scheduler_names:
        return Refusal("scheduler-not-served", f"pod {key} has schedulerName {record.scheduler_name}, "
                                               "which this extender does not serve")
    pod = record.view
    if pod is None:
        return Refusal("pod-unknown", f"pod {key} has no pending spec in the extender's state")

    info = state.node_info(args.node)
    if info is None:
        return Refusal("node-unknown", f"node {args.node} does not exist")
    if not info.node.ready:
        return Refusal("node-not-ready", f"node {args.node} is not Ready")
    if info.node.unschedulable and not _tolerates_cordon(pod):
        return Refusal("node-cordoned", f"node {args.node} is cordoned (unschedulable)")

    engine = runtime.engine  # once: a policy reload mid-request must not mix two policies
    status = engine.filter(pod, [info], state).failed.get(args.node)
    if status is not None:
        return Refusal("policy", f"node {args.node} does not pass the policy for pod {key}: {status.reason}")
    core = _core_engine(frozenset(engine.policy.filter_names))
    status = core.filter(pod, [info], state).failed.get(args.node)
    if status is not None:
        return Refusal("node-unfit", f"node {args.node} does not pass kube-scheduler's filters for pod {key}: "
                                     f"{status.reason}")
    return None
