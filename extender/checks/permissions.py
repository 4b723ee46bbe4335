"""The single source of truth for what this program may do in the API server.

Every API call the webhook or the standalone scheduler makes needs a matching RBAC
rule. The list lives here, in code, so that three things cannot drift apart:

* the start-up preflight (`extender.checks.preflight`) asks the API server about exactly
  these permissions and names the missing ones;
* `deploy/` grants exactly these (tests/deploy/test_rbac_matches_code.py fails on
  any rule too many or too few);
* the `kubectl auth can-i` lines printed to the operator reproduce each check.

A `Permission` is one verb on one resource: RBAC grants verbs one by one and a
SelfSubjectAccessReview answers for one verb, so finer grain keeps both honest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extender.cluster import kinds

__all__ = [
    "DEFAULT_NAMESPACE",
    "MODES",
    "SERVICE_ACCOUNTS",
    "Permission",
    "can_i_command",
    "required_permissions",
    "service_account_user",
]

#: Namespace the manifests in deploy/ install into; leases live there too.
DEFAULT_NAMESPACE = "scheduler-extender"

#: ServiceAccount names used by deploy/ for each mode (the defaults of `extender check`).
SERVICE_ACCOUNTS: dict[str, str] = {
    "webhook": "extender-webhook",
    "standalone": "extender-scheduler",
}

MODES = tuple(SERVICE_ACCOUNTS)


@dataclass(frozen=True, order=True)
class Permission:
    """One RBAC verb on one resource (optionally a subresource) of one API group.

    `namespaced` is about *where the grant is needed*, not about the resource kind:
    True means only in the component's own namespace (a Role there, e.g. its
    leader-election Lease); False means across the cluster (a ClusterRole), which is
    what pods, nodes, bindings and events of every namespace need.
    `why` is for people (docs, error messages) and takes no part in equality.
    """

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespaced: bool = False
    why: str = field(default="", compare=False)

    @property
    def resource_ref(self) -> str:
        """`resource[.group]` as kubectl and RBAC error messages spell it."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def rbac_resource(self) -> str:
        """`resource[/subresource]` as it appears in a Role's `resources:` list."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def describe(self) -> str:
        """Short human form: `create pods/binding` or `get leases.coordination.k8s.io`."""
        name = self.rbac_resource
        if self.group:
            name = f"{name} ({self.group})"
        scope = "in its namespace" if self.namespaced else "cluster-wide"
        return f"{self.verb} {name} {scope}"


def _verbs(
    verbs: tuple[str, ...], resource: str, why: str, *, group: str = "", namespaced: bool = False
) -> list[Permission]:
    return [Permission(v, resource, group, namespaced=namespaced, why=why) for v in verbs]


_READ = ("get", "list", "watch")
_STORAGE_READS = (
    ("persistentvolumeclaims", ""),
    ("persistentvolumes", ""),
    ("storageclasses", "storage.k8s.io"),
    ("csinodes", "storage.k8s.io"),
    ("csidrivers", "storage.k8s.io"),
    ("csistoragecapacities", "storage.k8s.io"),
    ("volumeattachments", "storage.k8s.io"),
)
_EVENT_WRITE = ("create", "patch")


DRA_GROUP = "resource.k8s.io"

#: The two pod-group APIs (docs/gangs.md): kube-scheduler v1.36's and Coscheduling's CRD.
POD_GROUP_API_GROUPS = ("scheduling.k8s.io", "scheduling.x-k8s.io")


def required_permissions(
    mode: str, *, bind: bool = True, leader_elect: bool = True, devices: bool = True, gangs: bool = True
) -> list[Permission]:
    """Everything `mode` ("webhook" or "standalone") needs, sorted, without duplicates.

    `bind` matters for the webhook only (its /bind route can be disabled); the
    standalone scheduler always binds. `leader_elect` matters for standalone only
    (the webhook is stateless and never elects a leader). `devices`: binds of shared-GPU
    pods go through the device ledger (deploy/ grants it; a policy without DeviceFit
    never writes it). `gangs`: pod groups of both APIs are read, and their status written
    (PodGroupScheduled, Coscheduling's phase and counts), as kube-scheduler's own RBAC does.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    perms: list[Permission] = []
    # Cluster state: every node, and every pod (to know what each node already runs).
    perms += _verbs(_READ, "pods", "watch pods to know each node's load and the pending pods")
    perms += _verbs(_READ, "nodes", "watch nodes to know capacity, labels, taints, readiness")
    # The keyed kinds this mode watches, as cluster/kinds.py declares them (namespaces' labels;
    # PodDisruptionBudgets for the standalone scheduler's preemption).
    for kind in kinds.watched_in(mode):
        perms += _verbs(_READ, kind.resource, kind.why, group=kind.group)
    # Node usage from metrics-server for the load-aware plugins (settings.usage). Granted in every
    # mode, not only when a policy uses them: a policy reload can turn them on at any time, and
    # the preflight runs once, at start-up. Read-only, and only aggregate node figures.
    perms += _verbs(("get", "list"), "nodes", "read node usage (metrics-server) for load-aware plugins",
                    group="metrics.k8s.io")
    # Storage objects, for the volume plugins (claims, volumes, classes, CSI limits and capacity).
    for resource, group in _STORAGE_READS:
        perms += _verbs(_READ, resource, "watch storage objects for the volume plugins", group=group)
    # DeviceClasses in every mode: which extended resources DRA serves (DRAExtendedResource), so
    # that the webhook's /bind check leaves them to the claims kube-scheduler allocates.
    perms += _verbs(_READ, "deviceclasses", "watch device classes (DRA, extended resources they serve)",
                    group=DRA_GROUP)
    # Events tell users why a pod went where it did, or why it did not go anywhere.
    perms += _verbs(_EVENT_WRITE, "events", "post Scheduled/FailedScheduling events")
    perms += _verbs(_EVENT_WRITE, "events", "post events (events.k8s.io/v1)", group="events.k8s.io")
    if gangs:
        for group in POD_GROUP_API_GROUPS:
            perms += _verbs(_READ, "podgroups", "watch pod groups to place their members all or nothing",
                            group=group)
            perms += [Permission(verb, "podgroups", group, "status",
                                 why="record a pod group's scheduling outcome on its status")
                      for verb in ("update", "patch")]
    if mode == "standalone" or bind:
        # Binding is core/v1: POST pods/NAME/binding, and the older POST .../bindings.
        perms.append(Permission("create", "pods", subresource="binding", why="bind pods to nodes"))
        perms.append(Permission("create", "bindings", why="bind pods (legacy bindings endpoint)"))
    if devices and (mode == "standalone" or bind):
        # Shared GPUs: the per-node device ledger (gpu-ledger.<node>) that every binding process
        # checks and writes before a bind, so that no two hand out the same share.
        perms += _verbs(("get", "create", "update"), "leases", "record device shares in the device ledger",
                        group="coordination.k8s.io", namespaced=True)
    if gangs and mode == "webhook" and bind:
        # The gang ledger (extender/kube/gangledger.py): one Lease per pod group holding members at
        # /bind, read-modify-PUT; and a watch of all of them, so that each process sees every
        # group's holds (the room they take, the competing gangs that must give way).
        perms += _verbs(("get", "list", "watch", "create", "update"), "leases",
                        "count the members held for each pod group, and see every group's holds",
                        group="coordination.k8s.io", namespaced=True)
        perms.append(Permission("patch", "pods", why="annotate pod-group members refused while their group was "
                                "incomplete, once it is, so that kube-scheduler retries them"))
    if mode == "standalone":
        perms.append(Permission("delete", "pods", why="evict lower-priority pods to make room (preemption)"))
        # VolumeBinding's bind step: a PV's claimRef, a claim's selected-node annotation.
        perms.append(Permission("update", "persistentvolumes", why="reserve a PersistentVolume for a claim"))
        perms.append(Permission("update", "persistentvolumeclaims",
                                why="ask for a claim's volume on the chosen node (selected-node)"))
        # Dynamic resource allocation (DynamicResources, docs/dra.md), as kube-scheduler's own role
        # (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go): read classes, slices and claims;
        # the claim's finalizer (update); its allocation and reservedFor (the status subresource,
        # and resourceclaims/binding, which DRAResourceClaimGranularStatusAuthorization asks for).
        for resource in ("resourceslices", "resourceclaims"):
            perms += _verbs(_READ, resource, "watch resource slices and claims for DRA", group=DRA_GROUP)
        perms += _verbs(_READ, "devicetaintrules", "watch device taint rules for DRA (where served)",
                        group=DRA_GROUP)
        perms.append(Permission("update", "resourceclaims", DRA_GROUP,
                                why="add kube-scheduler's finalizer to a claim it allocates"))
        perms += [Permission(verb, "resourceclaims", DRA_GROUP, sub,
                             why="write a claim's allocation and reservedFor (and deallocate an idle one)")
                  for sub in ("status", "binding") for verb in ("update", "patch")]
        perms.append(
            Permission(
                "patch",
                "pods",
                subresource="status",
                why="set PodScheduled=False/Unschedulable and nominatedNodeName on pods that cannot be "
                    "placed, DisruptionTarget on preempted pods",
            )
        )
        perms.append(
            Permission(
                "create",
                "selfsubjectaccessreviews",
                group="authorization.k8s.io",
                why="check these permissions at start-up",
            )
        )
        if leader_elect:
            perms += _verbs(
                ("get", "create", "update"),
                "leases",
                "elect one active replica",
                group="coordination.k8s.io",
                namespaced=True,
            )
    return sorted(set(perms), key=_sort_key)


def _sort_key(p: Permission) -> tuple[str, str, str, bool, str]:
    return (p.group, p.resource, p.subresource, p.namespaced, p.verb)


def service_account_user(namespace: str, name: str) -> str:
    """The user name the API server gives a ServiceAccount's token."""
    return f"system:serviceaccount:{namespace}:{name}"


def can_i_command(
    permission: Permission,
    service_account: str,
    namespace: str,
    *,
    target_namespace: str | None = None,
) -> str:
    """The `kubectl auth can-i` line that asks the same question as the preflight.

    `service_account` is the account's name and `namespace` its namespace, which is
    also where namespaced permissions (leases) are needed unless `target_namespace`
    says otherwise (e.g. `extender schedule --lease-namespace`). Cluster-wide permissions
    use `--all-namespaces`: without it kubectl asks about the current namespace only,
    which a namespaced Role could satisfy while the program still fails elsewhere.
    A subresource goes in `--subresource`, since kubectl reads `pods/binding` as
    "the pod named binding".
    """
    parts = ["kubectl", "auth", "can-i", permission.verb, permission.resource_ref]
    if permission.subresource:
        parts.append(f"--subresource={permission.subresource}")
    if permission.namespaced:
        parts.append(f"-n {target_namespace or namespace}")
    else:
        parts.append("--all-namespaces")
    parts.append(f"--as={service_account_user(namespace, service_account)}")
    return " ".join(parts)
