"""The API resources the fake serves, and the discovery documents that describe them.

Each entry records the per-resource rules of the real registry (pkg/registry/...):
whether PUT may create, whether DELETE returns the object or a Status, which field
labels a selector may use, and which subresources exist. Discovery is generated from
the same table so ``kubectl api-resources`` and the python client see a consistent server.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from . import selectors


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    storage: str  # storage key; both event APIs share "events", as they do in etcd
    field_labels: frozenset[str]
    fields_of: selectors.FieldsFunc
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    allow_create_on_update: bool = False
    allow_unconditional_update: bool = True  # PUT without metadata.resourceVersion
    return_deleted_object: bool = False
    has_status: bool = False  # main-resource writes keep status; /status writes keep the rest
    custom: bool = False  # served by a CRD: no strategic merge patch
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"


_META = frozenset({"metadata.name", "metadata.namespace"})
_POD_FIELDS = frozenset(selectors.pod_fields({}))
_EVENT_FIELDS = frozenset(selectors.event_fields({}))

POD = ResourceType(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    True,
    "pods",
    _POD_FIELDS,
    selectors.pod_fields,
    subresources=("status", "binding", "resize"),
    short_names=("po",),
    return_deleted_object=True,
    has_status=True,
)
NODE = ResourceType(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    False,
    "nodes",
    frozenset({"metadata.name", "spec.unschedulable"}),
    selectors.node_fields,
    subresources=("status",),
    short_names=("no",),
    has_status=True,
)
NAMESPACE = ResourceType(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    False,
    "namespaces",
    frozenset({"metadata.name", "status.phase"}),
    selectors.namespace_fields,
    subresources=("status",),
    short_names=("ns",),
    return_deleted_object=True,
    has_status=True,
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
)
CORE_EVENT = ResourceType(
    "",
    "v1",
    "events",
    "event",
    "Event",
    True,
    "events",
    _EVENT_FIELDS,
    selectors.event_fields,
    short_names=("ev",),
    allow_create_on_update=True,
)
EVENT = replace(CORE_EVENT, group="events.k8s.io")  # the same storage, served by both APIs
LEASE = ResourceType(
    "coordination.k8s.io",
    "v1",
    "leases",
    "lease",
    "Lease",
    True,
    "leases",
    _META,
    selectors.meta_fields,
    allow_create_on_update=True,
    allow_unconditional_update=False,
)

PRIORITY_CLASS = ResourceType(
    "scheduling.k8s.io",
    "v1",
    "priorityclasses",
    "priorityclass",
    "PriorityClass",
    False,
    "priorityclasses",
    frozenset({"metadata.name"}),
    selectors.meta_fields,
    short_names=("pc",),
)
POD_DISRUPTION_BUDGET = ResourceType(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "poddisruptionbudget",
    "PodDisruptionBudget",
    True,
    "poddisruptionbudgets",
    _META,
    selectors.meta_fields,
    subresources=("status",),
    short_names=("pdb",),
    has_status=True,
)

# metrics.k8s.io is not kube-apiserver's own: metrics-server registers it through an
# APIService and the aggregation layer proxies to it. Read-only (get, list; no watch), and
# absent unless a test installs it (FakeApiServer.serve_node_metrics), as on envtest.
METRICS_GROUP = "metrics.k8s.io"
NODE_METRICS = ResourceType(
    METRICS_GROUP,
    "v1beta1",
    "nodes",
    "",
    "NodeMetrics",
    False,
    "nodemetrics",
    frozenset({"metadata.name"}),
    selectors.meta_fields,
    verbs=("get", "list"),
)



def _with_legacy_name(obj: Any) -> dict[str, str]:
    """PV and PVC selectable fields also carry a bare ``name`` (kept for compatibility upstream)."""
    fields = selectors.meta_fields(obj)
    fields["name"] = fields["metadata.name"]
    return fields


STORAGE_GROUP = "storage.k8s.io"
PERSISTENT_VOLUME_CLAIM = ResourceType(
    "", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", True,
    "persistentvolumeclaims", frozenset({"metadata.name", "metadata.namespace", "name"}), _with_legacy_name,
    subresources=("status",), short_names=("pvc",), has_status=True,
)
PERSISTENT_VOLUME = ResourceType(
    "", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", False, "persistentvolumes",
    frozenset({"metadata.name", "name"}), _with_legacy_name, subresources=("status",), short_names=("pv",),
    has_status=True,
)
STORAGE_CLASS = ResourceType(
    STORAGE_GROUP, "v1", "storageclasses", "storageclass", "StorageClass", False, "storageclasses", _META,
    selectors.meta_fields, short_names=("sc",),
)
CSI_NODE = ResourceType(
    STORAGE_GROUP, "v1", "csinodes", "csinode", "CSINode", False, "csinodes", _META, selectors.meta_fields,
)
CSI_DRIVER = ResourceType(
    STORAGE_GROUP, "v1", "csidrivers", "csidriver", "CSIDriver", False, "csidrivers", _META,
    selectors.meta_fields,
)
CSI_STORAGE_CAPACITY = ResourceType(
    STORAGE_GROUP, "v1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", True,
    "csistoragecapacities", _META, selectors.meta_fields,
)
VOLUME_ATTACHMENT = ResourceType(
    STORAGE_GROUP, "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", False,
    "volumeattachments", _META, selectors.meta_fields, subresources=("status",), has_status=True,
)

# Pod groups (tests/fakeapi/podgroups.py): kube-scheduler v1.36's alpha API, served as with
# `--runtime-config=scheduling.k8s.io/v1alpha2=true` and the gang gates, and Coscheduling's CRD,
# served as if deploy/components/podgroup-crd were installed.
SCHEDULING_GROUP = "scheduling.k8s.io"
COSCHEDULING_GROUP = "scheduling.x-k8s.io"
POD_GROUP = ResourceType(
    SCHEDULING_GROUP, "v1alpha2", "podgroups", "podgroup", "PodGroup", True, "podgroups", _META,
    selectors.meta_fields, subresources=("status",), has_status=True,
)
WORKLOAD = ResourceType(
    SCHEDULING_GROUP, "v1alpha2", "workloads", "workload", "Workload", True, "workloads", _META,
    selectors.meta_fields,
)
COSCHEDULING_POD_GROUP = ResourceType(
    COSCHEDULING_GROUP, "v1alpha1", "podgroups", "podgroup", "PodGroup", True, "coschedulingpodgroups", _META,
    selectors.meta_fields, subresources=("status",), short_names=("pg", "pgs"), has_status=True, custom=True,
)

# Dynamic Resource Allocation (tests/fakeapi/dra.py): resource.k8s.io/v1, served by default in
# 1.36 (pkg/controlplane/instance.go, stableAPIGroupVersionsEnabledByDefault); the fake can be
# told not to serve it (FakeApiServer(dra_api=False)), as `--runtime-config=resource.k8s.io/v1=false`.
RESOURCE_GROUP = "resource.k8s.io"


def _slice_fields(obj: Any) -> dict[str, str]:
    """resourceslice.toSelectableFields: metadata.name, spec.nodeName ("" when unset), spec.driver."""
    spec = obj.get("spec") or {}
    return {
        "metadata.name": (obj.get("metadata") or {}).get("name") or "",
        "spec.nodeName": spec.get("nodeName") or "",
        "spec.driver": spec.get("driver") or "",
    }


# Every one of them answers a DELETE with the object (ReturnDeletedObject in its storage.go).
DEVICE_CLASS = ResourceType(
    RESOURCE_GROUP, "v1", "deviceclasses", "deviceclass", "DeviceClass", False, "deviceclasses", _META,
    selectors.meta_fields, return_deleted_object=True,
)
RESOURCE_SLICE = ResourceType(
    RESOURCE_GROUP, "v1", "resourceslices", "resourceslice", "ResourceSlice", False, "resourceslices",
    frozenset({"metadata.name", "spec.nodeName", "spec.driver"}), _slice_fields, return_deleted_object=True,
)
RESOURCE_CLAIM = ResourceType(
    RESOURCE_GROUP, "v1", "resourceclaims", "resourceclaim", "ResourceClaim", True, "resourceclaims", _META,
    selectors.meta_fields, subresources=("status",), has_status=True, return_deleted_object=True,
)
RESOURCE_CLAIM_TEMPLATE = ResourceType(
    RESOURCE_GROUP, "v1", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", True,
    "resourceclaimtemplates", _META, selectors.meta_fields, return_deleted_object=True,
)

RESOURCES: dict[tuple[str, str], ResourceType] = {
    (r.group, r.plural): r for r in (
        POD, NODE, NAMESPACE, CORE_EVENT, EVENT, LEASE, PRIORITY_CLASS, POD_DISRUPTION_BUDGET, NODE_METRICS,
        PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME, STORAGE_CLASS, CSI_NODE, CSI_DRIVER, CSI_STORAGE_CAPACITY,
        VOLUME_ATTACHMENT, POD_GROUP, WORKLOAD, COSCHEDULING_POD_GROUP, DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM,
        RESOURCE_CLAIM_TEMPLATE,
    )
}

# Create-only endpoints that are not stored as themselves.
BINDINGS = "bindings"
SELF_SUBJECT_ACCESS_REVIEWS = "selfsubjectaccessreviews"
AUTHZ_GROUP = "authorization.k8s.io"

# The preferred version of each group; a group may serve more (`served_versions`).
GROUP_VERSIONS = {"events.k8s.io": "v1", "coordination.k8s.io": "v1", AUTHZ_GROUP: "v1",
                  SCHEDULING_GROUP: "v1", "policy": "v1", STORAGE_GROUP: "v1", COSCHEDULING_GROUP: "v1alpha1",
                  RESOURCE_GROUP: "v1"}
# Aggregated groups: listed by discovery only while their backend is installed.
AGGREGATED_GROUP_VERSIONS = {METRICS_GROUP: "v1beta1"}

SERVER_VERSION = {
    "major": "1",
    "minor": "34",
    "emulationMajor": "1",
    "emulationMinor": "34",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "33",
    "gitVersion": "v1.34.0-fakeapi",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def lookup(group: str, plural: str) -> ResourceType | None:
    return RESOURCES.get((group, plural))


def _resource_entry(r: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    return entry


def group_version(group: str, aggregated: frozenset[str] = frozenset()) -> str | None:
    """The served version of `group` ("v1" for core), counting aggregated groups that are installed."""
    if group in aggregated:
        return AGGREGATED_GROUP_VERSIONS.get(group)
    return GROUP_VERSIONS.get(group) if group else "v1"


def served_versions(group: str, aggregated: frozenset[str] = frozenset()) -> list[str]:
    """Every version of `group` served, the preferred one first (scheduling.k8s.io: v1, v1alpha2)."""
    preferred = group_version(group, aggregated)
    if preferred is None:
        return []
    others = sorted({r.version for r in RESOURCES.values() if r.group == group} - {preferred})
    return [preferred, *others]


def resource_list(group: str, version: str, aggregated: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """APIResourceList for /api/v1 or /apis/{group}/{version}."""
    if version not in served_versions(group, aggregated):
        return None
    entries: list[dict[str, Any]] = []
    for r in RESOURCES.values():
        if r.group != group or r.version != version:
            continue
        entries.append(_resource_entry(r))
        for sub in r.subresources:
            verbs = ["create"] if sub == "binding" else ["get", "patch", "update"]
            kind = "Binding" if sub == "binding" else r.kind
            entries.append(
                {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
    if group == "":
        entries.append(
            {
                "name": BINDINGS,
                "singularName": "binding",
                "namespaced": True,
                "kind": "Binding",
                "verbs": ["create"],
            }
        )
    if group == AUTHZ_GROUP:
        entries.append(
            {
                "name": SELF_SUBJECT_ACCESS_REVIEWS,
                "singularName": "selfsubjectaccessreview",
                "namespaced": False,
                "kind": "SelfSubjectAccessReview",
                "verbs": ["create"],
            }
        )
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": sorted(entries, key=lambda e: e["name"]),
    }


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def api_group(group: str, aggregated: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    versions = served_versions(group, aggregated) if group else []
    if not versions:
        return None
    listed = [{"groupVersion": f"{group}/{version}", "version": version} for version in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": listed,
        "preferredVersion": listed[0],
    }


def api_group_list(aggregated: frozenset[str] = frozenset(), withheld: frozenset[str] = frozenset()) -> dict[str, Any]:
    """/apis: every served group, the aggregated ones installed, none of the `withheld`."""
    groups = []
    for group in sorted({*GROUP_VERSIONS, *aggregated} - withheld):
        g = api_group(group, aggregated)
        assert g is not None
        g.pop("kind")
        g.pop("apiVersion")
        groups.append(g)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
