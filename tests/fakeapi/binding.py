"""The Binding subresource, reproducing pkg/registry/core/pod/storage/storage.go.

``BindingREST.Create`` checks the URL name against the body, validates the target,
then ``setPodNodeAndMetadata`` runs inside a guarded update with the Binding's uid and
resourceVersion as preconditions. The order of those checks decides which error a
client sees when several apply, so it is kept exactly; so are the messages, which
scheduler code (and people reading its logs) match on.
"""

from __future__ import annotations

from typing import Any

from .clock import now_rfc3339
from .status import ApiError, FieldError, aggregate

# The registry wraps non-API errors from the update function in this conflict.
_BINDING_RESOURCE = "pods/binding"


def validate_binding(binding: Any, url_name: str | None) -> dict[str, Any]:
    """The checks before the pod is read: body shape, URL/body name, ValidatePodBinding."""
    if not isinstance(binding, dict):
        raise ApiError.bad_request(f"not a Binding object: {binding!r}")
    kind = binding.get("kind")
    if kind not in (None, "", "Binding"):
        raise ApiError.bad_request(f"not a Binding object: kind {kind!r}")
    meta = binding.get("metadata") or {}
    name = meta.get("name") or ""
    if url_name is not None and url_name != name:
        raise ApiError.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    errs: list[FieldError] = []
    if target.get("kind") not in (None, "", "Node"):
        errs.append(
            FieldError(
                "NotSupported", "target.kind", target.get("kind"), supported=["Node", "<empty>"]
            )
        )
    if not target.get("name"):
        errs.append(FieldError("Required", "target.name"))
    if errs:
        # errs.ToAggregate() is not an API status, so the handler answers 500 with an empty reason.
        raise ApiError(500, "", aggregate(errs))
    return binding


def assign(
    pod: dict[str, Any] | None, binding: dict[str, Any], namespace: str, copy_labels: bool
) -> dict[str, Any]:
    """Return the bound pod, or raise the error kube-apiserver would.

    ``copy_labels`` follows the PodTopologyLabelsAdmission feature (on by default in
    recent releases): labels on the Binding are copied onto the pod like annotations.
    """
    meta = binding.get("metadata") or {}
    name = meta.get("name") or ""
    if pod is None:
        raise ApiError.not_found("pods", name)
    pod_meta = pod["metadata"]
    key = f"/registry/pods/{namespace}/{name}"
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = meta.get(field) or ""
        if wanted and wanted != pod_meta.get(field):
            raise ApiError.conflict(
                "pods",
                name,
                _precondition_error(
                    key,
                    f"Precondition failed: {label} in precondition: {wanted}, "
                    f"{label} in object meta: {pod_meta.get(field, '')}",
                ),
            )
    spec = pod.setdefault("spec", {})
    if pod_meta.get("deletionTimestamp"):
        raise ApiError.conflict(
            _BINDING_RESOURCE, name, f"pod {name} is being deleted, cannot be assigned to a host"
        )
    if spec.get("nodeName"):
        raise ApiError.conflict(
            _BINDING_RESOURCE, name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
        )
    if spec.get("schedulingGates"):
        raise ApiError.conflict(
            _BINDING_RESOURCE, name, f"pod {name} has non-empty .spec.schedulingGates"
        )
    spec["nodeName"] = binding["target"]["name"]
    status = pod.setdefault("status", {})
    status.pop("nominatedNodeName", None)  # ClearingNominatedNodeNameAfterBinding
    if meta.get("annotations"):
        pod_meta.setdefault("annotations", {}).update(meta["annotations"])
    if copy_labels and meta.get("labels"):
        pod_meta.setdefault("labels", {}).update(meta["labels"])
    set_condition(status, {"type": "PodScheduled", "status": "True"})
    return pod


def _precondition_error(key: str, message: str) -> str:
    return f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {message}"


def set_condition(status: dict[str, Any], condition: dict[str, Any]) -> None:
    """podutil.UpdatePodCondition: replace by type; keep lastTransitionTime if status unchanged."""
    conditions = status.setdefault("conditions", [])
    new = {
        "type": condition["type"],
        "status": condition["status"],
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
    }
    for key in ("reason", "message"):
        if condition.get(key):
            new[key] = condition[key]
    for i, old in enumerate(conditions):
        if old.get("type") == new["type"]:
            if old.get("status") == new["status"]:
                new["lastTransitionTime"] = old.get("lastTransitionTime")
            conditions[i] = new
            return
    conditions.append(new)
