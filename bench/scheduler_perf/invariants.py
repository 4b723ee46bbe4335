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
        for name, value in _requests(pod).items():
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
    out = []
    for kind, items in found.items():
        out += [f"{kind}: {item}" for item in items[:limit]]
        if len(items) > limit:
            out.append(f"{kind}: ... {len(items) - limit} more")
    return out


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
