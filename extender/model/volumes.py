"""Views of the storage objects the volume plugins read, and of the volumes a pod uses.

PersistentVolumeClaims, PersistentVolumes, StorageClasses and the CSI objects are
parsed once, when the watch or the snapshot delivers them, into frozen views holding
only what scheduling reads (a cluster can hold tens of thousands of claims and
volumes). Field semantics follow the API server's defaults and the helpers
kube-scheduler v1.36 uses (k8s.io/component-helpers/storage/volume): the beta
storage-class annotation wins over `storageClassName`, a missing `volumeMode` is
Filesystem, a missing `volumeBindingMode` is Immediate, a claim is *fully* bound only
with `spec.volumeName` and the `pv.kubernetes.io/bind-completed` annotation.

A malformed field raises `InvalidObject` naming it, except a PV's node affinity: an
unreadable one is kept and matches no node, as kube-scheduler treats a node affinity
it cannot evaluate as a mismatch.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from extender.errors import InvalidObject, QuantityError
from extender.model.fields import (
    Namespaced,
    as_list,
    as_object,
    as_str,
    as_string_map,
    controller_ref,
    object_name,
    object_parts,
)
from extender.model.quantities import to_units
from extender.model.selectors import (
    LabelSelector,
    NodeSelectorTerm,
    parse_label_selector,
    parse_node_selector_term,
)
from extender.model.wellknown import BETA_ZONE, ZONE

# Annotations and well-known names (k8s.io/api/core/v1, component-helpers/storage/volume).
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
CLAIM_LOST = "Lost"
VOLUME_AVAILABLE = "Available"

# In-tree volume plugins whose volumes kube-scheduler counts as their CSI driver's
# (csi-translation-lib; NodeVolumeLimits' isCSIMigrationOn): pod/PV field -> (plugin, driver).
IN_TREE_DRIVERS: dict[str, tuple[str, str]] = {
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    "portworxVolume": ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
}
IN_TREE_PROVISIONERS: dict[str, str] = {plugin: driver for plugin, driver in IN_TREE_DRIVERS.values()}

_EMPTY: dict[str, str] = {}


def _storage(raw: Any, where: str) -> int | None:
    """`requests.storage` / `capacity.storage` in bytes (rounded up), None when absent."""
    if raw is None:
        return None
    try:
        return to_units("storage", raw)
    except QuantityError as exc:
        raise InvalidObject(f"{where}: {exc}") from None


# Interned: tens of thousands of claims and volumes share a few mode sets, classes and
# namespaces, and the volumes of one node share its node affinity.
_INTERN_LIMIT = 100_000
_mode_sets: dict[frozenset[str], frozenset[str]] = {}
_affinities: dict[bytes, NodeAffinity | None] = {}


def _modes(raw: Any, where: str) -> frozenset[str]:
    modes = frozenset(as_str(mode, f"{where}[{i}]") for i, mode in enumerate(as_list(raw, where)))
    if len(_mode_sets) < _INTERN_LIMIT:
        return _mode_sets.setdefault(modes, modes)
    return modes


def _intern(text: str) -> str:
    return sys.intern(text) if text else text


def _class_of(annotations: Mapping[str, str], spec_class: Any, where: str) -> str:
    """GetPersistentVolumeClaimClass / GetPersistentVolumeClass: the beta annotation first."""
    if ANN_BETA_STORAGE_CLASS in annotations:
        return annotations[ANN_BETA_STORAGE_CLASS]
    return as_str(spec_class, where)


# ---- claims ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimRef(Namespaced):
    """A PV's `spec.claimRef`, as far as binding reads it."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class Claim(Namespaced):
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    class_name: str  # "" = no class
    volume_name: str
    phase: str
    deleting: bool
    access_modes: frozenset[str]
    volume_mode: str
    request: int | None  # requests.storage in bytes
    selector: LabelSelector | None
    attributes_class: str
    selected_node: str | None  # the volume.kubernetes.io/selected-node annotation
    bind_completed: bool
    controller_uid: str  # the controller ownerReference's uid (ephemeral volumes: the pod)

    @property
    def fully_bound(self) -> bool:
        """kube-scheduler's isPVCFullyBound: a volume name and the bind-completed annotation."""
        return bool(self.volume_name) and self.bind_completed

    @property
    def size(self) -> int:
        return self.request or 0

    def ref(self) -> ClaimRef:
        return ClaimRef(self.namespace, self.name, self.uid, self.resource_version)

    @classmethod
    def from_dict(cls, raw: Any) -> Claim:
        meta, spec, status = object_parts(raw, "persistentvolumeclaim")
        annotations = as_string_map(meta.get("annotations"), "metadata.annotations")
        resources = as_object(spec.get("resources"), "spec.resources")
        requests = as_object(resources.get("requests"), "spec.resources.requests")
        selector = spec.get("selector")
        owner = controller_ref(meta)
        controller = as_str(owner.get("uid"), "metadata.ownerReferences.uid") if owner is not None else ""
        return cls(
            namespace=_intern(as_str(meta.get("namespace"), "metadata.namespace") or "default"),
            name=object_name(meta),
            uid=as_str(meta.get("uid"), "metadata.uid"),
            resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
            class_name=_intern(_class_of(annotations, spec.get("storageClassName"), "spec.storageClassName")),
            volume_name=as_str(spec.get("volumeName"), "spec.volumeName"),
            phase=_intern(as_str(status.get("phase"), "status.phase") or "Pending"),
            deleting=bool(meta.get("deletionTimestamp")),
            access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=_intern(as_str(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM),
            request=_storage(requests.get("storage"), "spec.resources.requests.storage"),
            selector=None if selector is None else parse_label_selector(selector, "spec.selector"),
            attributes_class=as_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
            selected_node=annotations.get(ANN_SELECTED_NODE),
            bind_completed=ANN_BIND_COMPLETED in annotations,
            controller_uid=controller,
        )


# ---- volumes --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """A PV's `spec.nodeAffinity.required`: any term must match the node's labels.

    kube-scheduler's CheckNodeAffinity matches the terms against a node made of the
    labels alone, so `matchFields` on `metadata.name` never match; `error` marks terms
    that could not be read, which match no node.
    """

    terms: tuple[NodeSelectorTerm, ...]
    error: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.error:
            return False
        return any(term.matches(labels, "") for term in self.terms)

    def describe(self) -> str:
        if self.error:
            return f"unreadable node affinity ({self.error})"
        parts = []
        for term in self.terms:
            exprs = [f"{r.key} {r.operator} {sorted(r.values) if isinstance(r.values, frozenset) else r.values}"
                     for r in (*term.expressions, *term.fields)]
            parts.append(" and ".join(exprs) or "(empty term)")
        return " or ".join(parts)


def _node_affinity(spec: Mapping[str, Any]) -> NodeAffinity | None:
    raw = spec.get("nodeAffinity")
    if raw is None:
        return None
    try:
        key = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (a YAML oddity): parse it without sharing
        return _parse_node_affinity(raw)
    found: NodeAffinity | None | Literal[False] = _affinities.get(key, False)  # None is cached too
    if found is False:
        found = _parse_node_affinity(raw)
        if len(_affinities) < _INTERN_LIMIT:
            _affinities[key] = found
    return found


def _parse_node_affinity(raw: Any) -> NodeAffinity | None:
    where = "spec.nodeAffinity.required"
    try:
        required = as_object(as_object(raw, "spec.nodeAffinity").get("required"), where)
    except InvalidObject as exc:
        return NodeAffinity((), str(exc))
    if not required:
        return None
    try:
        terms = as_list(required.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
        return NodeAffinity(tuple(parse_node_selector_term(t, f"{where}.nodeSelectorTerms[{i}]")
                                  for i, t in enumerate(terms)))
    except InvalidObject as exc:
        return NodeAffinity((), str(exc))


@dataclass(frozen=True, slots=True)
class CSIVolume:
    """The CSI identity of a volume: its driver and handle (translated for in-tree plugins)."""

    driver: str
    handle: str
    in_tree_plugin: str = ""  # set when translated: counted only on nodes with a CSINode

    @property
    def unique_name(self) -> str:
        return f"{self.driver}/{self.handle}"


def _in_tree_handle(source: str, spec: Mapping[str, Any], where: str, zone: str = "") -> str:
    """The volume handle csi-translation-lib derives for an in-tree source (its ID, mostly)."""
    if source == "awsElasticBlockStore":
        volume_id = as_str(spec.get("volumeID"), f"{where}.volumeID")
        return volume_id.rsplit("/", 1)[-1] if volume_id.startswith("aws://") else volume_id
    if source == "gcePersistentDisk":
        disk = as_str(spec.get("pdName"), f"{where}.pdName")
        return f"projects/UNSPECIFIED/zones/{zone or 'UNSPECIFIED'}/disks/{disk}"
    if source == "azureDisk":
        return as_str(spec.get("diskURI"), f"{where}.diskURI")
    return as_str(spec.get("volumeID"), f"{where}.volumeID")


def _csi_source(spec: Mapping[str, Any], labels: Mapping[str, str], where: str) -> CSIVolume | None:
    csi = spec.get("csi")
    if csi is not None:
        csi = as_object(csi, f"{where}.csi")
        return CSIVolume(as_str(csi.get("driver"), f"{where}.csi.driver"),
                         as_str(csi.get("volumeHandle"), f"{where}.csi.volumeHandle"))
    for source, (plugin, driver) in IN_TREE_DRIVERS.items():
        raw = spec.get(source)
        if raw is not None:
            zone = labels.get(ZONE) or labels.get(BETA_ZONE, "")
            handle = _in_tree_handle(source, as_object(raw, f"{where}.{source}"), f"{where}.{source}", zone)
            return CSIVolume(driver, handle, plugin)
    return None


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume."""

    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    class_name: str
    capacity: int  # bytes; 0 when missing
    access_modes: frozenset[str]
    volume_mode: str
    attributes_class: str
    claim_ref: ClaimRef | None
    phase: str
    deleting: bool
    node_affinity: NodeAffinity | None
    csi: CSIVolume | None
    bound_by_controller: bool = False

    def affinity_matches(self, labels: Mapping[str, str]) -> bool:
        return self.node_affinity is None or self.node_affinity.matches(labels)

    def bound_to(self, claim: Claim) -> bool:
        """IsVolumeBoundToClaim: pre-bound or bound to this claim (the uid, when set, must match)."""
        ref = self.claim_ref
        if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
            return False
        return not ref.uid or ref.uid == claim.uid

    @classmethod
    def from_dict(cls, raw: Any) -> Volume:
        meta, spec, status = object_parts(raw, "persistentvolume")
        labels = as_string_map(meta.get("labels"), "metadata.labels") or _EMPTY
        annotations = as_string_map(meta.get("annotations"), "metadata.annotations")
        capacity = as_object(spec.get("capacity"), "spec.capacity")
        claim_ref = None
        if spec.get("claimRef") is not None:
            ref = as_object(spec.get("claimRef"), "spec.claimRef")
            claim_ref = ClaimRef(_intern(as_str(ref.get("namespace"), "spec.claimRef.namespace")),
                                 as_str(ref.get("name"), "spec.claimRef.name"),
                                 as_str(ref.get("uid"), "spec.claimRef.uid"),
                                 as_str(ref.get("resourceVersion"), "spec.claimRef.resourceVersion"))
        return cls(
            name=object_name(meta),
            uid=as_str(meta.get("uid"), "metadata.uid"),
            resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
            labels=labels,
            class_name=_intern(_class_of(annotations, spec.get("storageClassName"), "spec.storageClassName")),
            capacity=_storage(capacity.get("storage"), "spec.capacity.storage") or 0,
            access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=_intern(as_str(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM),
            attributes_class=as_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
            claim_ref=claim_ref,
            phase=_intern(as_str(status.get("phase"), "status.phase")),
            deleting=bool(meta.get("deletionTimestamp")),
            node_affinity=_node_affinity(spec),
            csi=_csi_source(spec, labels, "spec"),
            bound_by_controller=ANN_BOUND_BY_CONTROLLER in annotations,
        )


# ---- classes and CSI objects ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyTerm:
    """A StorageClass allowedTopologies term: every (key, values) must hold; an empty term matches nothing."""

    expressions: tuple[tuple[str, frozenset[str]], ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.expressions:
            return False
        return all(labels.get(key) in values for key, values in self.expressions)


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str
    allowed_topologies: tuple[TopologyTerm, ...] = ()

    @property
    def delays_binding(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER

    def topology_matches(self, labels: Mapping[str, str]) -> bool:
        """MatchTopologySelectorTerms: no terms match every node, else any term must."""
        if not self.allowed_topologies:
            return True
        return any(term.matches(labels) for term in self.allowed_topologies)

    @classmethod
    def from_dict(cls, raw: Any) -> StorageClass:
        meta, _, _ = object_parts(raw, "storageclass")
        terms = []
        for i, term in enumerate(as_list(raw.get("allowedTopologies"), "allowedTopologies")):
            where = f"allowedTopologies[{i}]"
            term = as_object(term, where)
            expressions = []
            for j, expr in enumerate(as_list(term.get("matchLabelExpressions"), f"{where}.matchLabelExpressions")):
                path = f"{where}.matchLabelExpressions[{j}]"
                expr = as_object(expr, path)
                values = frozenset(as_str(v, f"{path}.values") for v in as_list(expr.get("values"), f"{path}.values"))
                expressions.append((as_str(expr.get("key"), f"{path}.key"), values))
            terms.append(TopologyTerm(tuple(expressions)))
        mode = as_str(raw.get("volumeBindingMode"), "volumeBindingMode") or IMMEDIATE
        return cls(object_name(meta), as_str(raw.get("provisioner"), "provisioner"), mode, tuple(terms))


@dataclass(frozen=True, slots=True)
class CSINode:
    """A node's CSI drivers and their attach limits (`spec.drivers[].allocatable.count`)."""

    name: str
    limits: Mapping[str, int]

    @classmethod
    def from_dict(cls, raw: Any) -> CSINode:
        meta, spec, _ = object_parts(raw, "csinode")
        limits: dict[str, int] = {}
        for i, driver in enumerate(as_list(spec.get("drivers"), "spec.drivers")):
            where = f"spec.drivers[{i}]"
            driver = as_object(driver, where)
            name = as_str(driver.get("name"), f"{where}.name")
            count = as_object(driver.get("allocatable"), f"{where}.allocatable").get("count")
            if count is not None:
                if isinstance(count, bool) or not isinstance(count, int):
                    raise InvalidObject(f"{where}.allocatable.count: expected an integer")
                limits[name] = count
        return cls(object_name(meta), limits)


@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    storage_capacity: bool  # spec.storageCapacity: the driver publishes CSIStorageCapacity objects

    @classmethod
    def from_dict(cls, raw: Any) -> CSIDriver:
        meta, spec, _ = object_parts(raw, "csidriver")
        return cls(object_name(meta), spec.get("storageCapacity") is True)


@dataclass(frozen=True, slots=True)
class StorageCapacity:
    """A CSIStorageCapacity: how big a volume of `class_name` can be made where `topology` holds."""

    namespace: str
    name: str
    class_name: str
    topology: LabelSelector | None  # None: reachable from no node
    capacity: int | None
    maximum_volume_size: int | None

    @property
    def limit(self) -> int | None:
        """volumeLimit: maximumVolumeSize when set (more precise), else capacity."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity

    @classmethod
    def from_dict(cls, raw: Any) -> StorageCapacity:
        meta, _, _ = object_parts(raw, "csistoragecapacity")
        topology = raw.get("nodeTopology")
        return cls(
            namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
            name=object_name(meta),
            class_name=as_str(raw.get("storageClassName"), "storageClassName"),
            topology=None if topology is None else parse_label_selector(topology, "nodeTopology"),
            capacity=_storage(raw.get("capacity"), "capacity"),
            maximum_volume_size=_storage(raw.get("maximumVolumeSize"), "maximumVolumeSize"),
        )


@dataclass(frozen=True, slots=True)
class VolumeAttachment:
    name: str
    node: str
    attacher: str
    volume_name: str  # spec.source.persistentVolumeName ("" for inline sources)

    @classmethod
    def from_dict(cls, raw: Any) -> VolumeAttachment:
        meta, spec, _ = object_parts(raw, "volumeattachment")
        source = as_object(spec.get("source"), "spec.source")
        return cls(object_name(meta), as_str(spec.get("nodeName"), "spec.nodeName"),
                   as_str(spec.get("attacher"), "spec.attacher"),
                   as_str(source.get("persistentVolumeName"), "spec.source.persistentVolumeName"))


# ---- the volumes of a pod ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A claim a pod uses: `persistentVolumeClaim.claimName`, or the `<pod>-<volume>` claim of
    a generic ephemeral volume (`ephemeral.volumeClaimTemplate`)."""

    name: str
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """An inline volume VolumeRestrictions checks for conflicts between pods on one node."""

    kind: str  # gcePersistentDisk, awsElasticBlockStore, iscsi, rbd
    identity: str  # pdName, volumeID, iqn, pool/image
    read_only: bool = False
    monitors: frozenset[str] = frozenset()  # rbd only

    def conflicts(self, other: InlineDisk) -> bool:
        """isVolumeConflict: the same disk, unless both mount it read-only (never for EBS)."""
        if self.kind != other.kind or self.identity != other.identity:
            return False
        if self.kind == "awsElasticBlockStore":
            return True
        if self.kind == "rbd" and not self.monitors & other.monitors:
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What the volume plugins read from a pod's `spec.volumes`, in spec order."""

    claims: tuple[PodClaim, ...] = ()
    disks: tuple[InlineDisk, ...] = ()
    inline_csi: tuple[CSIVolume, ...] = ()  # in-tree inline volumes counted against CSI limits

    @property
    def direct_claims(self) -> tuple[str, ...]:
        """Names of the `persistentVolumeClaim` volumes (not the ephemeral ones)."""
        return tuple(c.name for c in self.claims if not c.ephemeral)

    def __bool__(self) -> bool:
        return bool(self.claims or self.disks or self.inline_csi)


NO_VOLUMES = PodVolumes()
_VOLUME_SOURCES = frozenset({"persistentVolumeClaim", "ephemeral", "gcePersistentDisk", "awsElasticBlockStore",
                             "iscsi", "rbd", *IN_TREE_DRIVERS})


def _disk(source: str, spec: Mapping[str, Any], where: str) -> InlineDisk | None:
    read_only = spec.get("readOnly") is True
    if source == "gcePersistentDisk":
        return InlineDisk(source, as_str(spec.get("pdName"), f"{where}.pdName"), read_only)
    if source == "awsElasticBlockStore":
        return InlineDisk(source, as_str(spec.get("volumeID"), f"{where}.volumeID"), read_only)
    if source == "iscsi":
        return InlineDisk(source, as_str(spec.get("iqn"), f"{where}.iqn"), read_only)
    if source == "rbd":
        monitors = frozenset(as_str(m, f"{where}.monitors") for m in as_list(spec.get("monitors"), f"{where}.monitors"))
        pool = as_str(spec.get("pool"), f"{where}.pool") or "rbd"
        return InlineDisk(source, f"{pool}/{as_str(spec.get('image'), f'{where}.image')}", read_only, monitors)
    return None


def parse_pod_volumes(spec: Mapping[str, Any], pod_name: str) -> PodVolumes:
    """The claims, inline disks and in-tree inline volumes of a pod spec (NO_VOLUMES when none)."""
    raw_volumes = spec.get("volumes")
    if not raw_volumes:
        return NO_VOLUMES
    claims: list[PodClaim] = []
    disks: list[InlineDisk] = []
    inline_csi: list[CSIVolume] = []
    for i, volume in enumerate(as_list(raw_volumes, "spec.volumes")):
        where = f"spec.volumes[{i}]"
        volume = as_object(volume, where)
        if _VOLUME_SOURCES.isdisjoint(volume):
            continue  # configMap, secret, projected, emptyDir...: most volumes of most pods
        if "persistentVolumeClaim" in volume:
            claim = as_object(volume["persistentVolumeClaim"], f"{where}.persistentVolumeClaim")
            claims.append(PodClaim(as_str(claim.get("claimName"), f"{where}.persistentVolumeClaim.claimName")))
            continue
        if "ephemeral" in volume:
            claims.append(PodClaim(f"{pod_name}-{as_str(volume.get('name'), f'{where}.name')}", ephemeral=True))
            continue
        for source in volume.keys() & _VOLUME_SOURCES:
            spec_of = as_object(volume[source], f"{where}.{source}")
            disk = _disk(source, spec_of, f"{where}.{source}")
            if disk is not None:
                disks.append(disk)
            if source in IN_TREE_DRIVERS:
                plugin, driver = IN_TREE_DRIVERS[source]
                inline_csi.append(CSIVolume(driver, _in_tree_handle(source, spec_of, f"{where}.{source}"), plugin))
    if not (claims or disks or inline_csi):
        return NO_VOLUMES
    return PodVolumes(tuple(claims), tuple(disks), tuple(inline_csi))

