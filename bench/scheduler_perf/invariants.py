"""What the templates imply, checked on the final cluster after a workload ran.

Written apart from the scheduler's own code on purpose: a check that shares the code it
checks would agree with its bugs. Checked for every pod a scheduler placed (it has a
PodScheduled condition; pods the templates bind themselves with ``nodeName`` have none):

- node capacity: the requests of all pods bound to a node fit its allocatable (cpu,
  memory, pods and any other resource requested);
- nodeSelector, required node affinity and NoSchedule/NoExecute taints of its node;
- required pod anti-affinity: no pod matching a term in the same topology domain;
- required pod affinity: a matching pod in the same domain, or the pod matches its own
  term (the first pod of a group);
- hard topology spread: per constraint, the matching pods per domain differ by at most
  maxSkew (domains of the nodes that have the key and, per nodeAffinityPolicy and
  nodeTaintsPolicy, would admit the pod). Nodes added after the pods were placed make a
  domain the scheduler could not have seen: a violation both schedulers show is that.

For dynamic resource allocation (resource.k8s.io/v1), :class:`DeviceHolders` checks that
no device is allocated to two claims at any moment (fed the claims' watch), and
:func:`check_claims` the final claims: their devices exist and sit on the node of the pods
reserving them, and each placed pod holds its claims allocated and reserved for it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from extender.model.quantities import parse_quantity


def _matches_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if key not in labels:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; None matches nothing (as in pod affinity terms)."""
    if selector is None:
        return False
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
        _matches_expression(labels, e) for e in selector.get("matchExpressions") or [])


def _requests(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = defaultdict(Fraction)
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] += parse_quantity(str(value))
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total[name], parse_quantity(str(value)))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] += parse_quantity(str(value))
    total["pods"] += 1
    return total


def _served_by_claim(pod: Mapping[str, Any]) -> set[str]:
    """The extended resources the pod's own claim serves (DRAExtendedResource: named in
    pod.status.extendedResourceClaimStatus); they come from devices, not the node's allocatable."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    return {m.get("resourceName") for m in status.get("requestMappings") or ()}


def _node_admits(pod: Mapping[str, Any], node: Mapping[str, Any], taints: bool = True) -> bool:
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if terms:
        fields = {"metadata.name": node["metadata"]["name"]}
        if not any(all(_matches_expression(labels, e) for e in t.get("matchExpressions") or [])
                   and all(_matches_expression(fields, e) for e in t.get("matchFields") or [])
                   and (t.get("matchExpressions") or t.get("matchFields")) for t in terms):
            return False
    if taints:
        tolerations = spec.get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                    _tolerates(t, taint) for t in tolerations):
                return False
    return True


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _term_namespaces(term: Mapping[str, Any], pod_ns: str, namespaces: Mapping[str, Mapping[str, str]]) -> set[str]:
    chosen = set(term.get("namespaces") or [])
    selector = term.get("namespaceSelector")
    if selector is not None:
        chosen |= {ns for ns, labels in namespaces.items() if label_selector_matches(selector, labels)}
    return chosen or {pod_ns}


def check(pods: list[dict[str, Any]], nodes: list[dict[str, Any]], namespaces: Mapping[str, Mapping[str, str]],
          limit: int = 5) -> list[str]:
    """Violations found (at most ``limit`` of each kind, then a count)."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") in by_name
             and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    placed = [p for p in bound if any(c.get("type") == "PodScheduled" for c in (p.get("status") or {}).get("conditions") or [])]
    found: dict[str, list[str]] = defaultdict(list)

    used: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for pod in bound:
        by_claim = _served_by_claim(pod)
        for name, value in _requests(pod).items():
            if name not in by_claim:
                used[pod["spec"]["nodeName"]][name] += value
    for node_name, totals in used.items():
        allocatable = (by_name[node_name].get("status") or {}).get("allocatable") or {}
        for name, value in totals.items():
            if value and value > parse_quantity(str(allocatable.get(name, "0"))):
                found["capacity"].append(f"node {node_name}: {name} requested {float(value):g} > allocatable {allocatable.get(name, '0')}")

    for pod in placed:
        if not _node_admits(pod, by_name[pod["spec"]["nodeName"]]):
            found["node rules"].append(f"{_key(pod)} on {pod['spec']['nodeName']}: nodeSelector/affinity/taints")

    def domain(pod: Mapping[str, Any], key: str) -> str | None:
        return ((by_name[pod["spec"]["nodeName"]].get("metadata") or {}).get("labels") or {}).get(key)

    by_domain: dict[str, dict[str | None, list[dict[str, Any]]]] = {}

    def neighbours(pod: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
        """The other bound pods in the pod's domain of ``key`` (none when its node lacks the key)."""
        if key not in by_domain:
            index: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
            for other in bound:
                index[domain(other, key)].append(other)
            by_domain[key] = index
        where = domain(pod, key)
        return [] if where is None else [o for o in by_domain[key].get(where, []) if o is not pod]

    for pod in placed:
        affinity = (pod["spec"].get("affinity") or {})
        ns = pod["metadata"]["namespace"]
        for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            where, scope = domain(pod, term["topologyKey"]), _term_namespaces(term, ns, namespaces)
            clash = [o for o in neighbours(pod, term["topologyKey"]) if o["metadata"]["namespace"] in scope
                     and label_selector_matches(term.get("labelSelector"), o["metadata"].get("labels") or {})]
            if clash:
                found["anti-affinity"].append(f"{_key(pod)} shares {term['topologyKey']}={where} with {_key(clash[0])}")
        for term in (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            where, scope = domain(pod, term["topologyKey"]), _term_namespaces(term, ns, namespaces)
            selector = term.get("labelSelector")
            itself = ns in scope and label_selector_matches(selector, pod["metadata"].get("labels") or {})
            partner = any(o["metadata"]["namespace"] in scope
                          and label_selector_matches(selector, o["metadata"].get("labels") or {})
                          for o in neighbours(pod, term["topologyKey"]))
            if not partner and not itself:
                found["affinity"].append(f"{_key(pod)}: no pod matching its affinity in {term['topologyKey']}={where}")

    checked: set[str] = set()
    for pod in placed:
        for constraint in pod["spec"].get("topologySpreadConstraints") or []:
            if constraint.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            ns, key = pod["metadata"]["namespace"], constraint["topologyKey"]
            signature = repr((ns, key, constraint.get("labelSelector"), constraint.get("nodeAffinityPolicy"),
                              constraint.get("nodeTaintsPolicy"), pod["spec"].get("nodeSelector"),
                              (pod["spec"].get("affinity") or {}).get("nodeAffinity")))
            if signature in checked:
                continue
            checked.add(signature)
            honor_taints = constraint.get("nodeTaintsPolicy") == "Honor"
            honor_affinity = constraint.get("nodeAffinityPolicy", "Honor") == "Honor"
            eligible = {n["metadata"]["name"]: ((n["metadata"].get("labels") or {}).get(key)) for n in nodes
                        if key in (n["metadata"].get("labels") or {})
                        and (not honor_affinity or _node_admits(pod, n, taints=False))
                        and (not honor_taints or _node_admits({"spec": {"tolerations": pod["spec"].get("tolerations")}}, n))}
            counts: Counter[str] = Counter({value: 0 for value in eligible.values()})
            for other in bound:
                if other["metadata"]["namespace"] == ns and other["spec"]["nodeName"] in eligible and \
                        label_selector_matches(constraint.get("labelSelector"), other["metadata"].get("labels") or {}):
                    counts[eligible[other["spec"]["nodeName"]]] += 1
            if counts and max(counts.values()) - min(counts.values()) > constraint["maxSkew"]:
                found["spread"].append(f"{ns} {key}: skew {max(counts.values()) - min(counts.values())} > maxSkew "
                                       f"{constraint['maxSkew']} over {len(counts)} domains")
    return _listed(found, limit)


def _listed(found: Mapping[str, list[str]], limit: int) -> list[str]:
    """``kind: violation`` lines, at most ``limit`` of each kind, then how many more there were."""
    out = []
    for kind, items in found.items():
        out += [f"{kind}: {item}" for item in items[:limit]]
        if len(items) > limit:
            out.append(f"{kind}: ... {len(items) - limit} more")
    return out


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


# ---- dynamic resource allocation ---------------------------------------------------------------

Device = tuple[str, str, str]  # (driver, pool, device), as structured.DeviceID names one


def claim_devices(claim: Mapping[str, Any]) -> set[Device]:
    """The devices a claim's status.allocation holds exclusively. Admin access results are
    left out: such a device may be allocated to other claims at the same time
    (resource/v1 types.go, DeviceRequestAllocationResult.AdminAccess)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return {(r["driver"], r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results") or []
            if not r.get("adminAccess")}


class DeviceHolders:
    """Which claim holds each device at every moment, fed the claims' watch events in
    resourceVersion order; a device that a second claim gets while the first still holds it
    is a violation, however briefly it lasted (a final snapshot would miss the steady
    state's deleted claims)."""

    def __init__(self, limit: int = 5) -> None:
        self.holder: dict[Device, str] = {}
        self.held: dict[str, set[Device]] = {}
        self.names: dict[str, str] = {}
        self.violations: list[str] = []
        self.overflow = 0
        self.limit = limit

    def observe(self, kind: str, claim: Mapping[str, Any]) -> None:
        """One ADDED/MODIFIED/DELETED event of a ResourceClaim."""
        meta = claim.get("metadata") or {}
        uid = meta.get("uid", "")
        self.names[uid] = f"{meta.get('namespace')}/{meta.get('name')}"
        new = set() if kind == "DELETED" else claim_devices(claim)
        old = self.held.get(uid, set())
        for device in old - new:
            if self.holder.get(device) == uid:
                del self.holder[device]
        for device in sorted(new - old):
            other = self.holder.get(device)
            if other is not None and other != uid:
                self._violation(f"device {'/'.join(device)} allocated to {self.names[uid]} "
                                f"while {self.names.get(other, other)} holds it")
            self.holder[device] = uid
        if new:
            self.held[uid] = new
        else:
            self.held.pop(uid, None)

    def _violation(self, text: str) -> None:
        if len(self.violations) < self.limit:
            self.violations.append(f"device shared: {text}")
        else:
            self.overflow += 1

    def report(self) -> list[str]:
        return self.violations + ([f"device shared: ... {self.overflow} more"] if self.overflow else [])


def _pod_claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(pod claim entry, ResourceClaim name) per spec.resourceClaims entry; a template's
    claim is named in status.resourceClaimStatuses (None until the controller created it)."""
    generated = {s.get("name"): s.get("resourceClaimName")
                 for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        out.append((entry["name"], entry.get("resourceClaimName") or generated.get(entry["name"])))
    return out


def check_claims(pods: list[dict[str, Any]], claims: list[dict[str, Any]], slices: list[dict[str, Any]],
                 limit: int = 5) -> list[str]:
    """The claims of the final cluster: no device in two claims, every device of an
    allocation published by a slice, the devices of a claim on the node of each pod
    reserving it (a node-local slice's nodeName, or the allocation's metadata.name node
    selector), and every pod a scheduler placed holding each of its claims allocated and
    reserved for it."""
    found: dict[str, list[str]] = defaultdict(list)
    device_node: dict[Device, str | None] = {}
    for slice_ in slices:
        spec = slice_.get("spec") or {}
        for device in spec.get("devices") or []:
            device_node[(spec.get("driver"), (spec.get("pool") or {}).get("name"), device.get("name"))] = spec.get("nodeName")
    pods_by_uid = {p["metadata"].get("uid"): p for p in pods}
    by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    owner: dict[Device, str] = {}
    for claim in claims:
        key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        status = claim.get("status") or {}
        devices = claim_devices(claim)
        for device in sorted(devices):
            if device in owner:
                found["device shared"].append(f"{'/'.join(device)} in {owner[device]} and {key}")
            owner.setdefault(device, key)
            if device not in device_node:
                found["unknown device"].append(f"{key}: {'/'.join(device)} is in no ResourceSlice")
        selector_nodes = None
        for term in ((status.get("allocation") or {}).get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
            for field in term.get("matchFields") or []:
                if field.get("key") == "metadata.name" and field.get("operator") == "In":
                    selector_nodes = set(field.get("values") or [])
        for ref in status.get("reservedFor") or []:
            pod = pods_by_uid.get(ref.get("uid"))
            node = (pod or {}).get("spec", {}).get("nodeName")
            if not node:
                continue
            wrong = sorted({n for d in devices if (n := device_node.get(d)) and n != node})
            if wrong or (status.get("allocation") and selector_nodes is not None and node not in selector_nodes):
                found["claim node"].append(f"{key}: reserved by {_key(pod)} on {node}, devices on "
                                           f"{', '.join(wrong) or sorted(selector_nodes or ())}")
    for pod in pods:
        if not (pod.get("spec") or {}).get("nodeName") or not any(
                c.get("type") == "PodScheduled" for c in (pod.get("status") or {}).get("conditions") or []):
            continue
        for entry, name in _pod_claim_names(pod):
            claim = by_key.get((pod["metadata"]["namespace"], name)) if name else None
            status = (claim or {}).get("status") or {}
            if claim is None:
                found["pod claims"].append(f"{_key(pod)}: claim {entry} ({name}) does not exist")
            elif not status.get("allocation"):
                found["pod claims"].append(f"{_key(pod)}: claim {name} is not allocated")
            elif not any(r.get("uid") == pod["metadata"].get("uid") for r in status.get("reservedFor") or []):
                found["pod claims"].append(f"{_key(pod)}: claim {name} is not reserved for it")
    return _listed(found, limit)


def claim_counts(claims: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per namespace, (claims, allocated claims): what both schedulers' runs must share."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for claim in claims:
        row = counts[claim["metadata"]["namespace"]]
        row[0] += 1
        row[1] += bool((claim.get("status") or {}).get("allocation"))
    return {ns: (total, allocated) for ns, (total, allocated) in counts.items()}
