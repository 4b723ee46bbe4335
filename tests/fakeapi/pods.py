"""What kube-apiserver does to pods beyond storing them.

On create it applies API defaults and the default admission plugins (Priority,
DefaultTolerationSeconds), resets ``status`` to ``Pending`` with a QoS class and, for
gated pods, a ``PodScheduled=False/SchedulingGated`` condition. On update it refuses
spec changes other than the few mutable fields — in particular ``spec.nodeName`` can
only be set through the Binding subresource. On delete it decides between immediate
removal and graceful deletion. A scheduler tested against a laxer fake would pass tests
and then fail on a real cluster; that is the point of reproducing these rules.
"""

from __future__ import annotations

import copy
from typing import Any

from .quantities import parse_quantity, quantities_equal
from .status import ApiError, FieldError
from .validation import check_times, is_dns_label, is_dns_subdomain, validate_metadata

DEFAULT_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}

_DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)

MUTABLE_FIELDS_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _default_container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image") or ""
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        c["imagePullPolicy"] = (
            "Always"
            if ("@" not in tag and (":" not in tag or tag.endswith(":latest")))
            else "IfNotPresent"
        )
    resources = c.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)  # requests default to limits
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def apply_spec_defaults(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container (the API defaulting, run on every write)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            if isinstance(c, dict):
                _default_container(c)


def _qos_class(spec: dict[str, Any]) -> str:
    containers = [
        c
        for g in ("initContainers", "containers")
        for c in spec.get(g) or []
        if isinstance(c, dict)
    ]
    requests_seen = limits_seen = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in req:
                requests_seen = True
            if name in lim:
                limits_seen = True
            if name not in lim or not quantities_equal(req.get(name, lim[name]), lim[name]):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def validate_spec(spec: Any) -> list[FieldError]:
    """The parts of ValidatePodSpec a test is likely to get wrong."""
    if not isinstance(spec, dict):
        return [FieldError("Required", "spec")]
    errs: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        errs.append(FieldError("Required", "spec.containers"))
    for group in ("initContainers", "containers"):
        seen: set[str] = set()
        for i, c in enumerate(spec.get(group) or []):
            path = f"spec.{group}[{i}]"
            if not isinstance(c, dict):
                errs.append(FieldError("Invalid", path, str(c), "must be an object"))
                continue
            name = c.get("name") or ""
            if not name:
                errs.append(FieldError("Required", f"{path}.name"))
            elif not is_dns_label(name):
                errs.append(
                    FieldError(
                        "Invalid",
                        f"{path}.name",
                        name,
                        "a lowercase RFC 1123 label must "
                        "consist of lower case alphanumeric characters or '-'",
                    )
                )
            elif name in seen:
                errs.append(FieldError("Duplicate", f"{path}.name", name))
            seen.add(name)
            if not c.get("image"):
                errs.append(FieldError("Required", f"{path}.image"))
            for section in ("requests", "limits"):
                for rname, value in ((c.get("resources") or {}).get(section) or {}).items():
                    try:
                        if parse_quantity(value) < 0:
                            raise ValueError
                    except (ValueError, TypeError):
                        errs.append(
                            FieldError(
                                "Invalid",
                                f"{path}.resources.{section}[{rname}]",
                                value,
                                "must be a valid, non-negative quantity",
                            )
                        )
            res = c.get("resources") or {}
            for rname, req in (res.get("requests") or {}).items():
                lim = (res.get("limits") or {}).get(rname)
                try:
                    if lim is not None and parse_quantity(req) > parse_quantity(lim):
                        errs.append(
                            FieldError(
                                "Invalid",
                                f"{path}.resources.requests",
                                req,
                                f"must be less than or equal to {rname} limit of {lim}",
                            )
                        )
                except (ValueError, TypeError):
                    pass
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        if not isinstance(gate, dict) or not gate.get("name"):
            errs.append(FieldError("Required", f"spec.schedulingGates[{i}].name"))
    errs += _scheduling_group_errors(spec.get("schedulingGroup"))
    return errs


_SUBDOMAIN_DETAIL = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _scheduling_group_errors(group: Any) -> list[FieldError]:
    """spec.schedulingGroup (GenericWorkload): a union whose only member is podGroupName."""
    if group is None:
        return []
    name = group.get("podGroupName") if isinstance(group, dict) else None
    path = "spec.schedulingGroup.podGroupName"
    if name is None:
        return [FieldError("Invalid", path, None, "must specify one of: `podGroupName`")]
    if not isinstance(name, str) or not is_dns_subdomain(name):
        return [FieldError("Invalid", path, name, _SUBDOMAIN_DETAIL)]
    return []


def check_pod_times(obj: dict[str, Any]) -> None:
    check_times(
        "Pod", "v1", obj, times=("status.startTime",), condition_lists=("status.conditions",)
    )


def _admit_priority(pod: dict[str, Any], priority_classes: dict[str, dict[str, Any]]) -> None:
    """The Priority admission plugin: the class gives spec.priority and spec.preemptionPolicy;
    a pod may not set either to something else."""
    spec = pod["spec"]
    name = pod["metadata"].get("name", "")
    class_name = spec.get("priorityClassName")
    found = priority_classes.get(class_name) if class_name else None
    if class_name and found is None:
        raise ApiError.forbidden("pods", name, f"no PriorityClass with name {class_name} was found")
    value = int(found.get("value") or 0) if found else 0
    if spec.get("priority") is not None and spec["priority"] != value:
        raise ApiError.forbidden(
            "pods", name, f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                          f"priority admission controller computed {value} from the given PriorityClass name")
    spec["priority"] = value
    policy = (found or {}).get("preemptionPolicy") or "PreemptLowerPriority"
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy and found:
        raise ApiError.forbidden(
            "pods", name, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided "
                          f"in pod spec; priority admission controller computed {policy} from the given "
                          "PriorityClass name")
    spec.setdefault("preemptionPolicy", policy)


def prepare_create(pod: dict[str, Any], priority_classes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Validate, default and admit a new pod; returns the object to store (without identity)."""
    check_pod_times(pod)
    errs = validate_metadata(pod, namespaced=True) + validate_spec(pod.get("spec"))
    if errs:
        raise ApiError.invalid("Pod", (pod.get("metadata") or {}).get("name", ""), errs)
    spec = pod["spec"]
    apply_spec_defaults(spec)
    # Priority admission.
    _admit_priority(pod, priority_classes)
    # DefaultTolerationSeconds admission.
    tolerations = spec.setdefault("tolerations", [])
    for default in _DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute")
            for t in tolerations
            if isinstance(t, dict)
        ):
            tolerations.append(dict(default))
    # podStrategy.PrepareForCreate: status is not the client's to set.
    status: dict[str, Any] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    if spec.get("schedulingGates"):
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": None,
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }
        ]
    pod["status"] = status
    return pod


def _comparable_spec(spec: dict[str, Any], gated: bool) -> dict[str, Any]:
    view = copy.deepcopy(spec)
    for key in (
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
        "schedulingGates",
    ):
        view.pop(key, None)
    if gated:  # PodSchedulingReadiness: placement constraints may change while gated
        view.pop("nodeSelector", None)
        view.pop("affinity", None)
    for group in ("containers", "initContainers"):
        for c in view.get(group) or []:
            if isinstance(c, dict):
                c.pop("image", None)
    return view


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> None:
    """ValidatePodUpdate, reduced to the rules that matter to a scheduler."""
    name = old["metadata"]["name"]
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errs = validate_metadata(new, namespaced=True) + validate_spec(new_spec)
    old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
    for gate in new_spec.get("schedulingGates") or []:
        if gate.get("name") not in old_gates:
            errs.append(
                FieldError(
                    "Forbidden",
                    "spec.schedulingGates",
                    detail=f"only deletion is allowed, but found new scheduling gate "
                    f"'{gate.get('name')}'",
                )
            )
    old_tols = old_spec.get("tolerations") or []
    new_tols = new_spec.get("tolerations") or []
    for tol in old_tols:
        if not any(_same_toleration(tol, t) for t in new_tols):
            errs.append(
                FieldError(
                    "Forbidden",
                    "spec.tolerations",
                    detail="existing toleration can not be modified except its tolerationSeconds",
                )
            )
            break
    if _comparable_spec(new_spec, bool(old_gates)) != _comparable_spec(old_spec, bool(old_gates)):
        errs.append(FieldError("Forbidden", "spec", detail=MUTABLE_FIELDS_MESSAGE))
    if errs:
        raise ApiError.invalid("Pod", name, errs)


def keep_resize_only(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """podResizeStrategy (dropNonResizeUpdates): of the written pod only each container's
    `resources` and `resizePolicy` count; the rest is the stored pod. Containers added, removed,
    reordered or renamed leave the write as it came, for validate_resize to refuse."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    merged = copy.deepcopy(old)
    for field in ("containers", "initContainers"):
        written, stored = new_spec.get(field) or [], old_spec.get(field) or []
        if [c.get("name") for c in written] != [c.get("name") for c in stored]:
            return new
        for container, source in zip(merged["spec"].get(field) or [], written, strict=True):
            for key in ("resources", "resizePolicy"):
                if key in source:
                    container[key] = source[key]
                else:
                    container.pop(key, None)
    return merged


def validate_resize(new: dict[str, Any], old: dict[str, Any]) -> None:
    """ValidatePodResize, reduced: the containers stay the same ones (by name and order)."""
    for field in ("containers", "initContainers"):
        written = [c.get("name") for c in (new.get("spec") or {}).get(field) or []]
        stored = [c.get("name") for c in (old.get("spec") or {}).get(field) or []]
        if len(written) != len(stored):
            raise ApiError.invalid("Pod", old["metadata"]["name"], [FieldError(
                "Forbidden", f"spec.{field}", detail=f"{field} may not be added or removed on resize")])
        for index, (name, before) in enumerate(zip(written, stored, strict=True)):
            if name != before:
                raise ApiError.invalid("Pod", old["metadata"]["name"], [FieldError(
                    "Forbidden", f"spec.{field}[{index}].name",
                    detail=f"{field} may not be renamed or reordered on resize")])


def _same_toleration(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("key", "operator", "value", "effect")
    return all((a.get(k) or "") == (b.get(k) or "") for k in keys)


def deletion_grace_period(pod: dict[str, Any], requested: int | None) -> int:
    """podStrategy.CheckGracefulDelete: unbound or finished pods go at once, others wait."""
    period = requested
    if period is None:
        period = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        period = 30 if period is None else period
    if not (pod.get("spec") or {}).get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return 0
    return max(int(period), 0)
