"""Create and update rules of the storage kinds: claims, volumes, classes and the CSI objects.

What kube-apiserver v1.36 does to them, as far as a scheduler can tell
(pkg/registry/core/persistentvolume{,claim}, pkg/registry/storage/*, the validation in
pkg/apis/{core,storage}/validation and two default admission plugins):

* defaults: a claim's and a volume's ``volumeMode`` Filesystem, a volume's reclaim policy
  Retain, a class's reclaim policy Delete and ``volumeBindingMode`` Immediate, a CSI
  driver's ``attachRequired`` and ``storageCapacity`` flags;
* create resets status to phase Pending (only the PV controller makes a volume Available
  or binds a claim; the fake has none, tests play it);
* StorageObjectInUseProtection admission: ``kubernetes.io/pvc-protection`` and
  ``kubernetes.io/pv-protection`` finalizers, so a deleted claim or volume stays
  (being deleted) until a controller lets it go;
* DefaultStorageClass admission: a claim created without a class gets the default one
  (``storageclass.kubernetes.io/is-default-class: "true"``, the newest if several);
* validation of the fields scheduling reads, with the real paths and wording, and the
  immutability rules (a claim's spec except ``volumeName`` once and, when bound, its
  storage request; a volume's source and mode; a class's provisioner, parameters,
  reclaim policy and binding mode; a CSINode driver's fields except its count).
"""

from __future__ import annotations

import copy
from typing import Any

from .clock import now_rfc3339
from .resources import ResourceType
from .status import ApiError, FieldError
from .store import Store
from .validation import is_dns_subdomain, qualified_name_errors, validate_metadata

STORAGE_KINDS = frozenset({"persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes",
                           "csidrivers", "csistoragecapacities", "volumeattachments"})
ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
VOLUME_MODES = ["Block", "Filesystem"]
BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
VOLUME_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd",
                  "iscsi", "cinder", "cephfs", "fc", "flocker", "flexVolume", "azureFile", "vsphereVolume",
                  "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "local",
                  "storageos", "csi")


def _access_mode_errors(modes: Any, path: str, *, detail: str) -> list[FieldError]:
    if not modes:
        return [FieldError("Required", path, detail=detail)]
    errs = [FieldError("NotSupported", path, mode, supported=ACCESS_MODES)
            for mode in modes if mode not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errs.append(FieldError("Forbidden", path, detail="may not use ReadWriteOncePod with other access modes"))
    return errs


def _volume_mode_errors(spec: dict[str, Any], path: str) -> list[FieldError]:
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        return [FieldError("NotSupported", path, mode, supported=VOLUME_MODES)]
    return []


# ---- claims --------------------------------------------------------------------------------


def _claim_errors(claim: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(claim, namespaced=True)
    spec = claim.get("spec") or {}
    errs += _access_mode_errors(spec.get("accessModes"), "spec.accessModes",
                                detail="at least 1 access mode is required")
    requests = (spec.get("resources") or {}).get("requests") or {}
    if "storage" not in requests:
        errs.append(FieldError("Required", "spec.resources[storage]"))
    name = spec.get("storageClassName")
    if name and not is_dns_subdomain(name):
        errs.append(FieldError("Invalid", "spec.storageClassName", name, "a lowercase RFC 1123 subdomain"))
    errs += _volume_mode_errors(spec, "spec.volumeMode")
    return errs


def _default_class(store: Store) -> str | None:
    """DefaultStorageClass admission: the newest class marked default."""
    classes, _ = store.list("storageclasses")
    marked = [c for c in classes
              if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
    if not marked:
        return None
    newest = max(marked, key=lambda c: (c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"]))
    return str(newest["metadata"]["name"])


def _prepare_claim(claim: dict[str, Any], store: Store) -> None:
    spec = claim.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    if spec.get("storageClassName") is None and BETA_CLASS_ANNOTATION not in annotations:
        default = _default_class(store)
        if default is not None:
            spec["storageClassName"] = default
    claim["status"] = {"phase": "Pending"}  # status reset, then the v1 default phase
    _add_finalizer(claim, PVC_PROTECTION)


def _claim_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = _claim_errors(new)
    new_spec = copy.deepcopy(new.get("spec") or {})
    old_spec = copy.deepcopy(old.get("spec") or {})
    if not old_spec.get("volumeName"):
        old_spec["volumeName"] = new_spec.get("volumeName")  # volumeName may be set once
        if old_spec["volumeName"] is None:
            old_spec.pop("volumeName")
            new_spec.pop("volumeName", None)
    if old_spec.get("storageClassName") is None and new_spec.get("storageClassName") is not None:
        old_spec["storageClassName"] = new_spec["storageClassName"]  # set from nil (retroactive default)
    bound = (new.get("status") or {}).get("phase") == "Bound"
    old_size = ((old_spec.get("resources") or {}).get("requests") or {}).get("storage")
    if bound:
        new_spec.setdefault("resources", {}).setdefault("requests", {})["storage"] = old_size
        new_spec.pop("volumeAttributesClassName", None)
        old_spec.pop("volumeAttributesClassName", None)
    if new_spec != old_spec:
        errs.append(FieldError("Forbidden", "spec", detail="spec is immutable after creation except "
                               "resources.requests and volumeAttributesClassName for bound claims"))
    return errs


# ---- volumes -------------------------------------------------------------------------------


def _volume_errors(volume: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(volume, namespaced=False)
    spec = volume.get("spec") or {}
    errs += _access_mode_errors(spec.get("accessModes"), "spec.accessModes", detail="")
    capacity = spec.get("capacity") or {}
    if not capacity:
        errs.append(FieldError("Required", "spec.capacity"))
    elif set(capacity) != {"storage"}:
        errs.append(FieldError("NotSupported", "spec.capacity", capacity, supported=["storage"]))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in RECLAIM_POLICIES:
        errs.append(FieldError("NotSupported", "spec.persistentVolumeReclaimPolicy", policy,
                               supported=RECLAIM_POLICIES))
    sources = [s for s in VOLUME_SOURCES if spec.get(s) is not None]
    if not sources:
        errs.append(FieldError("Required", "spec", detail="must specify a volume type"))
    for extra in sources[1:]:
        errs.append(FieldError("Forbidden", f"spec.{extra}", detail="may not specify more than 1 volume type"))
    if "local" in sources and not (spec.get("nodeAffinity") or {}).get("required"):
        errs.append(FieldError("Required", "spec.nodeAffinity", detail="Local volume requires node affinity"))
    errs += _volume_mode_errors(spec, "spec.volumeMode")
    return errs


def _prepare_volume(volume: dict[str, Any]) -> None:
    spec = volume.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    volume["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now_rfc3339()}
    _add_finalizer(volume, PV_PROTECTION)


def _volume_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = _volume_errors(new)
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if any(new_spec.get(s) != old_spec.get(s) for s in VOLUME_SOURCES):
        errs.append(FieldError("Forbidden", "spec.persistentvolumesource",
                               detail="spec.persistentvolumesource is immutable after creation"))
    if new_spec.get("volumeMode") != old_spec.get("volumeMode"):
        errs.append(FieldError("Invalid", "volumeMode", new_spec.get("volumeMode"), "field is immutable"))
    if old_spec.get("nodeAffinity") is not None and new_spec.get("nodeAffinity") != old_spec.get("nodeAffinity"):
        errs.append(FieldError("Invalid", "nodeAffinity", new_spec.get("nodeAffinity"), "field is immutable"))
    return errs


# ---- classes and CSI objects ----------------------------------------------------------------


def _class_errors(cls: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(cls, namespaced=False)
    provisioner = cls.get("provisioner") or ""
    if not provisioner:
        errs.append(FieldError("Required", "provisioner"))
    else:
        errs += qualified_name_errors(provisioner.lower(), "provisioner")
    if cls.get("reclaimPolicy") not in ("Delete", "Retain"):
        errs.append(FieldError("NotSupported", "reclaimPolicy", cls.get("reclaimPolicy"),
                               supported=["Delete", "Retain"]))
    if cls.get("volumeBindingMode") not in BINDING_MODES:
        errs.append(FieldError("NotSupported", "volumeBindingMode", cls.get("volumeBindingMode"),
                               supported=BINDING_MODES))
    return errs


def _class_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = _class_errors(new)
    for name in ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"):
        if new.get(name) != old.get(name):
            errs.append(FieldError("Invalid", name, new.get(name), "field is immutable"))
    return errs


def _csi_node_errors(node: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(node, namespaced=False)
    seen = set()
    for i, driver in enumerate((node.get("spec") or {}).get("drivers") or []):
        path = f"spec.drivers[{i}]"
        if not driver.get("name"):
            errs.append(FieldError("Required", f"{path}.name"))
        if not driver.get("nodeID"):
            errs.append(FieldError("Required", f"{path}.nodeID"))
        if driver.get("name") in seen:
            errs.append(FieldError("Duplicate", f"{path}.name", driver.get("name")))
        seen.add(driver.get("name"))
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None and (not isinstance(count, int) or count < 0):
            errs.append(FieldError("Invalid", f"{path}.allocatable.count", count,
                                   "must be greater than or equal to 0"))
    return errs


def _csi_node_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = _csi_node_errors(new)
    olds = {d.get("name"): d for d in (old.get("spec") or {}).get("drivers") or []}
    for driver in (new.get("spec") or {}).get("drivers") or []:
        before = olds.get(driver.get("name"))
        if before is not None and {k: v for k, v in driver.items() if k != "allocatable"} != \
                {k: v for k, v in before.items() if k != "allocatable"}:
            errs.append(FieldError("Invalid", "spec.drivers", driver, "field is immutable"))
    return errs


def _prepare_csi_driver(driver: dict[str, Any]) -> None:
    spec = driver.setdefault("spec", {})
    for name, default in (("attachRequired", True), ("podInfoOnMount", False), ("storageCapacity", False),
                          ("requiresRepublish", False), ("seLinuxMount", False),
                          ("fsGroupPolicy", "ReadWriteOnceWithFSType"), ("volumeLifecycleModes", ["Persistent"])):
        spec.setdefault(name, default)


def _capacity_errors(capacity: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(capacity, namespaced=True)
    name = capacity.get("storageClassName") or ""
    if not name:
        errs.append(FieldError("Required", "storageClassName"))
    return errs


def _capacity_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = _capacity_errors(new)
    for name in ("nodeTopology", "storageClassName"):
        if new.get(name) != old.get(name):
            errs.append(FieldError("Invalid", name, new.get(name), "field is immutable"))
    return errs


def _attachment_errors(attachment: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(attachment, namespaced=False)
    spec = attachment.get("spec") or {}
    if not spec.get("attacher"):
        errs.append(FieldError("Required", "spec.attacher"))
    if not spec.get("nodeName"):
        errs.append(FieldError("Required", "spec.nodeName"))
    source = spec.get("source") or {}
    if ("persistentVolumeName" in source) == ("inlineVolumeSpec" in source):
        errs.append(FieldError("Required", "spec.source",
                               detail="must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
    return errs


def _attachment_update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs = _attachment_errors(new)
    if new.get("spec") != old.get("spec"):
        errs.append(FieldError("Invalid", "spec", new.get("spec"), "field is immutable"))
    return errs


# ---- entry points --------------------------------------------------------------------------


def _add_finalizer(obj: dict[str, Any], finalizer: str) -> None:
    finalizers = obj.setdefault("metadata", {}).setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)


def _raise(rt: ResourceType, obj: dict[str, Any], errs: list[FieldError]) -> None:
    if errs:
        raise ApiError.invalid(rt.kind, (obj.get("metadata") or {}).get("name", ""), errs, rt.group)


_CREATE = {
    "persistentvolumeclaims": _claim_errors,
    "persistentvolumes": _volume_errors,
    "storageclasses": _class_errors,
    "csinodes": _csi_node_errors,
    "csidrivers": lambda obj: validate_metadata(obj, namespaced=False),
    "csistoragecapacities": _capacity_errors,
    "volumeattachments": _attachment_errors,
}
_UPDATE = {
    "persistentvolumeclaims": _claim_update_errors,
    "persistentvolumes": _volume_update_errors,
    "storageclasses": _class_update_errors,
    "csinodes": _csi_node_update_errors,
    "csidrivers": lambda new, old: validate_metadata(new, namespaced=False),
    "csistoragecapacities": _capacity_update_errors,
    "volumeattachments": _attachment_update_errors,
}


def prepare_create(rt: ResourceType, obj: dict[str, Any], store: Store) -> dict[str, Any]:
    """Defaults, admission and validation of a new storage object (store lock held)."""
    if rt.storage == "persistentvolumeclaims":
        _prepare_claim(obj, store)
    elif rt.storage == "persistentvolumes":
        _prepare_volume(obj)
    elif rt.storage == "storageclasses":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif rt.storage == "csidrivers":
        _prepare_csi_driver(obj)
    _raise(rt, obj, _CREATE[rt.storage](obj))
    return obj


def validate_update(rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str) -> None:
    if subresource == "status":
        return
    if rt.storage == "persistentvolumeclaims":
        new.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    elif rt.storage == "persistentvolumes":
        spec = new.setdefault("spec", {})
        spec.setdefault("volumeMode", "Filesystem")
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    elif rt.storage == "storageclasses":
        new.setdefault("reclaimPolicy", "Delete")
        new.setdefault("volumeBindingMode", "Immediate")
    elif rt.storage == "csidrivers":
        _prepare_csi_driver(new)
    _raise(rt, new, _UPDATE[rt.storage](new, old))
