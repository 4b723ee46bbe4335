"""Cluster events a plugin registers for, each with its queueing hint (kube-scheduler's
EnqueueExtensions.EventsToRegister and QueueingHintFn).

A pod that no node could take waits in the standalone scheduler's queue until the cluster
changes. Which changes may help it is the business of the plugins that refused it: each
declares, next to its filter, the events (a resource and what happened to it) after which
its answer may differ, and optionally a hint that looks at the pod and the changed object to
say yes or no. The queue asks only the plugins that refused the pod (scheduler/hints.py);
a plugin that declares nothing (no `events_to_register`) is woken by every event, as in
kube-scheduler, so a third-party plugin is never starved.

Resources are the API resource names the cluster state's stores use; `PODS` is a pod placed
on a node (kube-scheduler's AssignedPod): the waiting pods are not events for each other.
A node update is one event per part of the node that changed (its labels, taints, ...), named
as kube-scheduler names them; a node update of several parts wakes a pod if any part does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from extender.model.pods import PodView

# What changed. A placed pod (kube-scheduler's AssignedPod): added = placed on a node (bound,
# or arrived bound); deleted = deleted or finished (Succeeded, Failed).
PODS = "pods"
NODES = "nodes"
NAMESPACES = "namespaces"
# The storage kinds VolumeBinding & co. read.
PERSISTENT_VOLUME_CLAIMS = "persistentvolumeclaims"
PERSISTENT_VOLUMES = "persistentvolumes"
STORAGE_CLASSES = "storageclasses"
CSI_NODES = "csinodes"
CSI_DRIVERS = "csidrivers"
CSI_STORAGE_CAPACITIES = "csistoragecapacities"
VOLUME_ATTACHMENTS = "volumeattachments"
STORAGE = (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, CSI_NODES, CSI_DRIVERS,
           CSI_STORAGE_CAPACITIES, VOLUME_ATTACHMENTS)
# The dynamic resource allocation kinds DynamicResources reads.
DEVICE_CLASSES = "deviceclasses"
RESOURCE_SLICES = "resourceslices"
RESOURCE_CLAIMS = "resourceclaims"
DEVICE_TAINT_RULES = "devicetaintrules"
DRA = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, DEVICE_TAINT_RULES)

# What happened to it. UPDATE stands for any change of a kind whose changes are not told
# apart (namespaces, the storage and DRA kinds: added, updated or deleted).
ADD = "Add"
DELETE = "Delete"
UPDATE = "Update"
UPDATE_POD_LABEL = "UpdatePodLabel"
UPDATE_POD_SCALE_DOWN = "UpdatePodScaleDown"
UPDATE_NODE_LABEL = "UpdateNodeLabel"
UPDATE_NODE_TAINT = "UpdateNodeTaint"
UPDATE_NODE_UNSCHEDULABLE = "UpdateNodeSpecUnschedulable"
UPDATE_NODE_CONDITION = "UpdateNodeCondition"
UPDATE_NODE_ALLOCATABLE = "UpdateNodeAllocatable"
UPDATE_NODE_DECLARED_FEATURE = "UpdateNodeDeclaredFeature"
UPDATE_NODE_DEVICES = "UpdateNodeDevices"  # the shared-device inventory a node agent publishes
UPDATE_NODE_READABLE = "UpdateNodeReadable"  # the node became readable, or unreadable
NODE_UPDATES = frozenset({UPDATE_NODE_LABEL, UPDATE_NODE_TAINT, UPDATE_NODE_UNSCHEDULABLE, UPDATE_NODE_CONDITION,
                          UPDATE_NODE_ALLOCATABLE, UPDATE_NODE_DECLARED_FEATURE, UPDATE_NODE_DEVICES,
                          UPDATE_NODE_READABLE})

# QueueingHintFn: may the change of `obj` make the waiting `pod` fit where the plugin refused it?
# `obj` is the event's object: a PodRecord for PODS, a NodeView for NODES, the key
# ("namespace/name", or "name") for the other kinds. It runs with the queue's lock held, once
# per waiting pod per event: read the two objects, nothing else.
Hint = Callable[[PodView, Any], bool]


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """One thing that happened: `action` (ADD, UPDATE_NODE_LABEL, ...) to a `resource`."""

    resource: str
    action: str


@dataclass(frozen=True, slots=True)
class EventHint:
    """kube-scheduler's ClusterEventWithHint: the plugin's answer may change after any of
    `actions` on `resource`; `hint` (None: always yes) says whether for this pod and object."""

    resource: str
    actions: frozenset[str]
    hint: Hint | None = None

    def matches(self, event: ClusterEvent) -> bool:
        return event.resource == self.resource and event.action in self.actions


def on(resource: str, *actions: str, hint: Hint | None = None) -> EventHint:
    """An EventHint for `actions` (none given: every action) on `resource`."""
    return EventHint(resource, frozenset(actions) if actions else _every_action(resource), hint)


def on_each(resources: Sequence[str], *actions: str, hint: Hint | None = None) -> tuple[EventHint, ...]:
    """The same registration for several kinds (the storage kinds, the DRA kinds)."""
    return tuple(on(resource, *actions, hint=hint) for resource in resources)


def _every_action(resource: str) -> frozenset[str]:
    if resource == NODES:
        return NODE_UPDATES | {ADD, DELETE}
    if resource == PODS:
        return frozenset({ADD, DELETE, UPDATE_POD_LABEL, UPDATE_POD_SCALE_DOWN})
    return frozenset({ADD, DELETE, UPDATE})


# The registration nearly every filter that reads a node shares: a new node may fit.
NODE_ADDED = on(NODES, ADD)


__all__ = [
    "ADD", "CSI_DRIVERS", "CSI_NODES", "CSI_STORAGE_CAPACITIES", "DELETE", "DEVICE_CLASSES", "DEVICE_TAINT_RULES", "DRA",
    "NAMESPACES", "NODES", "NODE_ADDED", "NODE_UPDATES", "PERSISTENT_VOLUMES", "PERSISTENT_VOLUME_CLAIMS", "PODS",
    "RESOURCE_CLAIMS", "RESOURCE_SLICES", "STORAGE", "STORAGE_CLASSES", "UPDATE", "UPDATE_NODE_ALLOCATABLE",
    "UPDATE_NODE_CONDITION", "UPDATE_NODE_DECLARED_FEATURE", "UPDATE_NODE_DEVICES", "UPDATE_NODE_LABEL",
    "UPDATE_NODE_READABLE", "UPDATE_NODE_TAINT", "UPDATE_NODE_UNSCHEDULABLE", "UPDATE_POD_LABEL",
    "UPDATE_POD_SCALE_DOWN", "VOLUME_ATTACHMENTS", "ClusterEvent", "EventHint", "Hint", "on", "on_each",
]
