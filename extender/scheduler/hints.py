"""Queueing hints for a placed pod's deletion or arrival, a node's update and a storage
object's change: which waiting pods it may help.

kube-scheduler asks each plugin that refused a waiting pod whether an event may change its
answer (the plugin's QueueingHintFn), and moves the pod only on a yes. Deleting a pod frees
its cpu and memory for every pod, but its host ports only for pods that want those ports,
its spread and anti-affinity counts only for pods whose selectors match it, its volumes only
for pods limited by volumes. Without these answers, each of thousands of deletions sends
every waiting pod through another failing cycle (EventHandlingPodDelete: 1.8 × the failed
cycles of kube-scheduler, and 0.8 × its throughput).

The hints run with the scheduling queue's lock held, once per waiting pod per event, so
they read only the two objects and stop at the first yes. A built-in plugin without a hint
for an event answers no (it does not register for it); a plugin of a policy's own answers
yes, as a plugin without hints does in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from extender.cluster.volumes import CLAIMS
from extender.model.affinity import AffinityTerm
from extender.model.pods import PodView
from extender.model.ports import conflict
from extender.model.records import PodRecord
from extender.model.selectors import NOTHING
from extender.policy import names
from extender.policy.builtin import FILTERS, OPT_IN_FILTERS

DO_NOT_SCHEDULE = "DoNotSchedule"
# Every built-in filter, and the engine's own refusal of an unreadable node.
_BUILT_IN = frozenset(plugin.name for plugin in (*FILTERS, *OPT_IN_FILTERS)) | {names.NODE_UNUSABLE}

Hint = Callable[[PodView, PodRecord], bool]


def _always(pod: PodView, deleted: PodRecord) -> bool:
    return True


def _ports(pod: PodView, deleted: PodRecord) -> bool:
    """NodePorts.isSchedulableAfterPodDeleted: the deleted pod held one of the ports."""
    used = deleted.host_ports
    return bool(used) and any(conflict(wanted, used) for wanted in pod.host_ports)


def _spread(pod: PodView, deleted: PodRecord) -> bool:
    """PodTopologySpread.isSchedulableAfterPodChange: a pod of the same namespace that a hard
    constraint's selector counts. Without hard constraints of its own the pod was refused by
    defaults this hint does not rebuild: yes."""
    if deleted.namespace != pod.namespace:
        return False
    hard = [c for c in pod.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE]
    return not hard or any(c.selector.matches(deleted.labels) for c in hard)


def _all_match(terms: tuple[AffinityTerm, ...], namespace: str, labels: Mapping[str, str]) -> bool:
    """podMatchesAllAffinityTerms; a namespace selector (whose labels the hint does not read)
    counts as a match, so the answer errs towards a retry."""
    return bool(terms) and all(
        term.namespace_selector is not NOTHING and term.selector.matches(labels)
        or term.matches(namespace, labels) for term in terms)


def _anti_affinity(pod: PodView, deleted: PodRecord) -> bool:
    """InterPodAffinity.isSchedulableAfterPodChange for a deletion: the deleted pod matched the
    pod's required anti-affinity, or the pod matched the deleted pod's."""
    mine = pod.affinity.required_anti if pod.affinity is not None else ()
    if _all_match(mine, deleted.namespace, deleted.labels):
        return True
    theirs = deleted.affinity.required_anti if deleted.affinity is not None else ()
    return _all_match(theirs, pod.namespace, pod.labels)


def _volume_limits(pod: PodView, deleted: PodRecord) -> bool:
    """NodeVolumeLimits (CSILimits).isSchedulableAfterPodDeleted: it attached a volume."""
    volumes = deleted.volumes
    return bool(volumes.claims or volumes.inline_csi)


def _volume_restrictions(pod: PodView, deleted: PodRecord) -> bool:
    """VolumeRestrictions.isSchedulableAfterPodDeleted: of the same namespace, and it mounted one
    of the pod's disks or used one of its claims (ReadWriteOncePod)."""
    if deleted.namespace != pod.namespace or not deleted.volumes:
        return False
    theirs = deleted.volumes
    if any(mine.conflicts(other) for mine in pod.volumes.disks for other in theirs.disks):
        return True
    claims = set(pod.volumes.direct_claims)
    return bool(claims) and any(name in claims for name in theirs.direct_claims)


_AFTER_DELETE: dict[str, Hint] = {
    names.RESOURCE_FIT: _always,
    names.NODE_PORTS: _ports,
    names.POD_TOPOLOGY_SPREAD: _spread,
    names.INTER_POD_AFFINITY: _anti_affinity,
    names.NODE_VOLUME_LIMITS: _volume_limits,
    names.VOLUME_RESTRICTIONS: _volume_restrictions,
    # Shares of a node's devices, and its real load: a pod's deletion may free either.
    names.DEVICE_FIT: _always,
    names.NODE_LOAD: _always,
}
# The other built-ins are node-only checks, or plugins whose room follows other objects'
# events (DRA claims, volumes, node features): no deletion of a pod changes their answer.


def _affinity(pod: PodView, added: PodRecord) -> bool:
    """InterPodAffinity.isSchedulableAfterPodChange for an added pod: it matches every term of
    the pod's required affinity (one pod must satisfy them all)."""
    return pod.affinity is not None and _all_match(pod.affinity.required, added.namespace, added.labels)


# kube-scheduler's plugins registered for AssignedPodAdd (GangScheduling's pod groups wake
# on their own events here: scheduler/gangs.py). Any other plugin's answer stays the same.
_AFTER_ADD: dict[str, Hint] = {
    names.INTER_POD_AFFINITY: _affinity,
    names.POD_TOPOLOGY_SPREAD: _spread,
}


def _asks(table: dict[str, Hint], pod: PodView, other: PodRecord, rejected_by: frozenset[str]) -> bool:
    """Any refusing plugin's hint says yes; a built-in without one says no, any other plugin yes."""
    for plugin in rejected_by:
        hint = table.get(plugin)
        if hint is None:
            if plugin not in _BUILT_IN:
                return True
        elif hint(pod, other):
            return True
    return False


def after_pod_placed(added: PodRecord) -> Callable[[PodView, frozenset[str]], bool]:
    """Whether a pod now placed on a node (bound, or arrived bound) may help a waiting pod."""
    return lambda pod, rejected_by: _asks(_AFTER_ADD, pod, added, rejected_by)


# The plugins registered for storage events (claims, volumes, classes, CSI objects).
_STORAGE_PLUGINS = frozenset({names.VOLUME_BINDING, names.VOLUME_RESTRICTIONS, names.NODE_VOLUME_LIMITS,
                              names.VOLUME_ZONE})
_NOT_STORAGE = _BUILT_IN - _STORAGE_PLUGINS


def after_storage_changed(resource: str, key: str) -> Callable[[PodView, frozenset[str]], bool]:
    """Whether a storage object's change may help a waiting pod: one refused by a volume plugin
    (or a plugin this module does not know), and for a claim, a pod that uses it (the volume
    plugins' claim hints)."""
    namespace, _, claim = key.partition("/")

    def wakes(pod: PodView, rejected_by: frozenset[str]) -> bool:
        if not rejected_by:
            return True
        if rejected_by <= _NOT_STORAGE:
            return False
        if rejected_by - _BUILT_IN or resource != CLAIMS or not key:
            return True  # a plugin of the policy's own, or a volume plugin and not a claim
        return pod.namespace == namespace and any(c.name == claim for c in pod.volumes.claims)

    return wakes


# Which built-ins read each part of a node (kube-scheduler's node update events:
# UpdateNodeLabel, UpdateNodeTaint, UpdateNodeAllocatable, UpdateNodeDeclaredFeature, ...;
# NodeReady is our reading of spec.unschedulable, conditions and their taints).
# DynamicResources and DeviceFit read labels, taints, spec.unschedulable and allocatable.
_WIDE_READERS = frozenset({names.DYNAMIC_RESOURCES, names.DEVICE_FIT})
_NODE_READERS: dict[str, frozenset[str]] = {
    "labels": _WIDE_READERS | {names.NODE_AFFINITY, names.NODE_LABELS, names.POD_TOPOLOGY_SPREAD,
                               names.INTER_POD_AFFINITY, names.VOLUME_BINDING, names.VOLUME_ZONE},
    "taints": _WIDE_READERS | {names.TAINT_TOLERATION, names.NODE_READY, names.POD_TOPOLOGY_SPREAD},
    "unschedulable": _WIDE_READERS | {names.NODE_READY},
    "conditions": frozenset({names.NODE_READY}),
    "allocatable": _WIDE_READERS | {names.RESOURCE_FIT, names.NODE_VOLUME_LIMITS, names.NODE_LOAD},
    "declared_features": frozenset({names.NODE_DECLARED_FEATURES}),
}


def after_node_updated(changed: frozenset[str]) -> Callable[[PodView, frozenset[str]], bool] | None:
    """Whether a node update that changed the parts `changed` (keys of `_NODE_READERS`) may help
    a waiting pod: one refused by a built-in that reads one of them, or by a plugin of the
    policy's own. None when a part without readers here changed: every pod may fit."""
    if not changed <= _NODE_READERS.keys():
        return None
    readers = frozenset().union(*(_NODE_READERS[part] for part in changed))

    def wakes(pod: PodView, rejected_by: frozenset[str]) -> bool:
        return not rejected_by or bool(rejected_by & readers) or not rejected_by <= _BUILT_IN

    return wakes


def after_pod_deleted(deleted: PodRecord) -> Callable[[PodView, frozenset[str]], bool]:
    """Whether the deletion of the placed pod `deleted` may help a waiting pod that the
    plugins `rejected_by` refused (none recorded: yes)."""
    return lambda pod, rejected_by: not rejected_by or _asks(_AFTER_DELETE, pod, deleted, rejected_by)


__all__ = ["after_node_updated", "after_pod_deleted", "after_pod_placed", "after_storage_changed"]
