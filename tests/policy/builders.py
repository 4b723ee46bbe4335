"""Small builders for pods and nodes as Kubernetes dicts, so tests read like manifests."""

from __future__ import annotations

from typing import Any

from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.model.resources import add_into
from extender.policy.cluster_view import EMPTY_CLUSTER
from tests.helpers import present


def pod_dict(
    name: str = "p",
    *,
    namespace: str = "default",
    requests: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    gates: list[str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
) -> dict[str, Any]:
    if containers is None:
        containers = [{"name": "c", "resources": {"requests": dict(requests or {})}}]
    spec = {"containers": containers, **present(
        initContainers=init_containers, nodeSelector=node_selector,
        affinity=affinity and {"nodeAffinity": affinity}, tolerations=tolerations,
        schedulingGates=[{"name": g} for g in gates or ()], overhead=overhead)}
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}", **present(labels=labels)}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def make_pod(name: str = "p", **kwargs: Any) -> PodView:
    return PodView.from_dict(pod_dict(name, **kwargs))


def node_dict(
    name: str = "n",
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str | None = "110",
    extra: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: str = "True",
    conditions: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, **(extra or {})}
    if pods is not None:
        allocatable["pods"] = pods
    status_conditions = [{"type": "Ready", "status": ready}]
    status_conditions += [{"type": k, "status": v} for k, v in (conditions or {}).items()]
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": status_conditions},
    }


def make_node(name: str = "n", *, running: list[PodView] | None = None, **kwargs: Any) -> NodeInfo:
    """A NodeInfo with `running` pods accounted the way the cluster state accounts them."""
    return with_pods(NodeInfo(NodeView.from_dict(node_dict(name, **kwargs))), running or [])


def with_pods(info: NodeInfo, pods: list[PodView]) -> NodeInfo:
    """A new NodeInfo with `pods` added to its requests (what assuming a pod does)."""
    requested = dict(info.requested)
    score_requested = dict(info.score_requested)
    for pod in pods:
        add_into(requested, pod.requests)
        add_into(score_requested, pod.score_requests)
    return NodeInfo(info.node, requested, score_requested, info.pod_count + len(pods))


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str = "", value: str = "", effect: str = "", operator: str = "Equal") -> dict[str, str]:
    item = {"key": key, "operator": operator, "effect": effect}
    if value:
        item["value"] = value
    return item


def run_filter(plugin: Any, pod: PodView, info: NodeInfo) -> Any:
    """The plugin's answer for one node, checked to be the same by the engine path and filter()."""
    check = plugin.prefilter(pod, EMPTY_CLUSTER)
    fast = check if check is None or not callable(check) else check(info)
    slow = plugin.filter(pod, info)
    assert fast == slow
    return fast


def reasons(result: Any) -> tuple[str, ...]:
    """The reasons of a filter answer: () when the node passes."""
    if result is None:
        return ()
    if isinstance(result, str):
        return (result,)
    return result.reasons


def run_scores(plugin: Any, pod: PodView, infos: list[NodeInfo]) -> list[float]:
    """Raw scores through prescore (None = plugin skipped), checked against score()."""
    fn = plugin.prescore(pod, EMPTY_CLUSTER, infos)
    if fn is None:
        return []
    raw = [fn(info) for info in infos]
    assert raw == [plugin.score(pod, info) for info in infos]
    return raw


# ---- whole clusters, for the plugins that look beyond one node ----------------------------

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(labels: dict[str, str] | None = None, key: str = HOSTNAME, **extra: Any) -> dict[str, Any]:
    """A v1.PodAffinityTerm selecting `labels` (None: no labelSelector at all)."""
    item: dict[str, Any] = {"topologyKey": key, **extra}
    if labels is not None:
        item["labelSelector"] = {"matchLabels": labels}
    return item


def pod_affinity(*, required: list[dict[str, Any]] = (), anti: list[dict[str, Any]] = (),
                 preferred: list[tuple[int, dict[str, Any]]] = (),
                 preferred_anti: list[tuple[int, dict[str, Any]]] = ()) -> dict[str, Any]:
    """spec.affinity with podAffinity/podAntiAffinity blocks."""
    req, pref = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
    affinity: dict[str, Any] = {}
    if required or preferred:
        affinity["podAffinity"] = {req: list(required),
                                   pref: [{"weight": w, "podAffinityTerm": t} for w, t in preferred]}
    if anti or preferred_anti:
        affinity["podAntiAffinity"] = {req: list(anti),
                                       pref: [{"weight": w, "podAffinityTerm": t} for w, t in preferred_anti]}
    return affinity


def spread(key: str = ZONE, *, max_skew: int = 1, labels: dict[str, str] | None = None,
           when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    """A v1.TopologySpreadConstraint."""
    item: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if labels is not None:
        item["labelSelector"] = {"matchLabels": labels}
    return item


def placed(name: str, node: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
           spec: dict[str, Any] | None = None, cpu: str = "100m", owner: tuple[str, str] | None = None,
           deleting: bool = False, priority: int = 0, started: str = "",
           status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod dict bound to `node` (or pending when `node` is empty)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {},
                            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True,
                                    "apiVersion": "apps/v1", "uid": f"uid-{owner[1]}"}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                            "priority": priority, **(spec or {})}
    if node:
        body["nodeName"] = node
    pod_status: dict[str, Any] = {"phase": "Running" if node else "Pending", **(status or {})}
    if started:
        pod_status["startTime"] = started
    return {"metadata": meta, "spec": body, "status": pod_status}


def zoned_nodes(zones: dict[str, int], **kwargs: Any) -> list[dict[str, Any]]:
    """Nodes named <zone>-<i>, labelled with their zone: zoned_nodes({"a": 2, "b": 1})."""
    return [node_dict(f"{zone}-{i}", labels={ZONE: zone}, **kwargs)
            for zone, count in zones.items() for i in range(count)]


def cluster_state(nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = (),
                  namespaces: dict[str, dict[str, str]] | None = None) -> Any:
    """A ClusterState holding `nodes`, `pods` and namespaces with their labels."""
    from extender.cluster.state import ClusterState

    state = ClusterState()
    state.replace_nodes(nodes)
    state.namespaces.replace([{"metadata": {"name": n, "labels": labels}}
                              for n, labels in (namespaces or {}).items()])
    state.replace_pods(list(pods))
    return state


def dra_state(nodes: list[dict[str, Any]], classes: list[dict[str, Any]], slices: list[dict[str, Any]],
              claims: list[dict[str, Any]] = ()) -> Any:
    """``cluster_state(nodes)`` with the DRA store holding these DeviceClasses, ResourceSlices and
    ResourceClaims (no pods, no namespaces)."""
    from extender.cluster import dra_store

    state = cluster_state(nodes)
    state.dra_store.replace(dra_store.CLASSES, list(classes))
    state.dra_store.replace(dra_store.SLICES, list(slices))
    state.dra_store.replace(dra_store.CLAIMS, list(claims))
    return state


def incoming(name: str = "new", *, labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None,
             namespace: str = "default", owner: tuple[str, str] | None = None, priority: int = 0,
             cpu: str = "100m") -> PodView:
    """A pending pod's view."""
    return PodView.from_dict(placed(name, "", namespace=namespace, labels=labels, spec=spec, owner=owner,
                                    priority=priority, cpu=cpu))


def feasible(plugin: Any, pod: PodView, state: Any) -> dict[str, Any]:
    """Node name -> the filter's answer (None when it passes), through prefilter with the cluster."""
    check = plugin.prefilter(pod, state)
    return {info.name: (None if check is None else check(info)) for info in state.all_node_infos()}


def cluster_scores(plugin: Any, pod: PodView, state: Any, nodes: list[NodeInfo] | None = None) -> dict[str, float]:
    """Node name -> normalised score of a cluster-aware scorer ({} when it skips the pod)."""
    nodes = nodes if nodes is not None else state.all_node_infos()
    fn = plugin.prescore(pod, state, nodes)
    if fn is None:
        return {}
    raw = [fn(info) for info in nodes]
    return dict(zip([n.name for n in nodes], fn.normalize(raw, nodes=nodes), strict=True))
