"""The four extender verbs as plain functions: parsed body in, reply dict out.

No Flask here, so the verbs are tested and benchmarked without HTTP; `verb_routes.py`
only decodes, times and encodes around them (in front of Flask, which app.py builds).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from extender import metrics, wire
from extender.cycle import steps
from extender.errors import ClusterError, InvalidObject, WireError
from extender.explain import explanation as explaining
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.engine import unknown_node_status
from extender.policy.reservations import Reservation, merged_annotations, release_all
from extender.policy.status import Code, Status
from extender.settings import Settings
from extender.webhook.bind_guard import refuse_bind
from extender.webhook.nodeviews import NodeViewCache
from extender.webhook.podviews import PodViewCache
from extender.webhook.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """A verb's reply plus what the access log and metrics want to know about it."""

    reply: Any
    result: str
    pod: str = ""
    nodes: int = 0
    note: str = ""


def _parse_pod(raw: Any) -> PodView:
    try:
        return PodView.from_dict(raw)
    except InvalidObject as exc:
        raise WireError(f"invalid Pod: {exc}") from None


def _pod(raw: Any, pods: PodViewCache | None = None) -> PodView:
    return pods.view(raw, _parse_pod) if pods is not None else _parse_pod(raw)


def _zero_scores(names: Sequence[str]) -> orjson.Fragment:
    """[{"Host": name, "Score": 0}, ...], already encoded: the reply of a policy without
    scorers (the webhook's default). The names are encoded in one call and the entries
    spliced between them, so hundreds of nodes cost no Python work per node.

    The splice is exact while no name needs escaping: then `","` occurs in the encoded
    list only between two names. A name with an escape (no real node has one) takes the
    per-node path."""
    if not names:
        return orjson.Fragment(b"[]")
    encoded = orjson.dumps(names)
    if b"\\" in encoded:
        return orjson.Fragment(orjson.dumps([{"Host": name, "Score": 0} for name in names]))
    return orjson.Fragment(b'[{"Host":' + encoded[1:-1].replace(b'","', b'","Score":0},{"Host":"')
                           + b',"Score":0}]')


def _decoded_nodes(args: wire.ExtenderArgs) -> dict[str, Any]:
    """The NodeList of a call without NodeNames, decoded whole (not a SentNodeList). The schema
    lets exactly one of Nodes and NodeNames be set, so this is a dict; the check says so to mypy."""
    nodes = args.nodes
    if not isinstance(nodes, dict):
        raise WireError("invalid ExtenderArgs: exactly one of Nodes and NodeNames must be set")
    return nodes


def _candidates(runtime: Runtime, cache: NodeViewCache, args: wire.ExtenderArgs
                ) -> tuple[list[NodeInfo], list[str]]:
    """NodeInfos for the request's nodes, and the names the cluster state does not know."""
    if args.node_names is not None:
        return runtime.state.node_infos(args.node_names)
    if isinstance(args.nodes, wire.SentNodeList):
        return cache.infos(args.nodes.values, runtime.state), []
    views = []
    for index, item in enumerate(_decoded_nodes(args)["items"]):
        try:
            views.append(cache.view(item))
        except InvalidObject as exc:
            raise WireError(f"invalid ExtenderArgs: Nodes.items.{index}: {exc}") from None
    return cache.infos(views, runtime.state), []


def explain_verb(runtime: Runtime, cache: NodeViewCache, body: Any, *, pods: PodViewCache | None = None) -> Outcome:
    """POST /explain: the filter verb's body in, every reason and score out.

    Nodes are found exactly as /filter finds them, so the answer is what /filter and
    /prioritize would do with this policy.
    """
    args = wire.load_extender_args(body)
    pod = _pod(args.pod, pods)
    infos, unknown = _candidates(runtime, cache, args)
    notes = []
    if args.node_names is not None and not runtime.state.ready:
        notes.append("the extender's cluster state is not synced yet: node usage may be incomplete")
    explanation = explaining.explain_pod(runtime.engine, pod, infos, cluster=runtime.state,
                                         unknown=unknown, notes=notes)
    return Outcome(explaining.to_json(explanation), "ok", pod.key, len(infos) + len(unknown))


def _require_synced(runtime: Runtime, args: wire.ExtenderArgs) -> str:
    if args.node_names is not None and not runtime.state.ready:
        return "the extender's cluster state is not synced yet; retry shortly"
    return ""


def filter_verb(runtime: Runtime, cache: NodeViewCache, body: Any, *, pods: PodViewCache | None = None) -> Outcome:
    """A full NodeList read as sent (`NodeViewCache.args`) is answered with the bytes of the
    nodes kept, as kube-scheduler sent them: it reads the returned Node objects, so they must be its own."""
    args = wire.load_extender_args(body)
    pod = _pod(args.pod, pods)
    not_ready = _require_synced(runtime, args)
    if not_ready:
        return Outcome(wire.error_result(not_ready), "not-ready", pod.key)
    if pod.group is not None and runtime.gangs is not None and runtime.gangs.handles(pod):
        if not _pods_listed(runtime, "the first pod group member reached /filter"):
            message = "the extender is listing the cluster's pods for pod groups; retry shortly"
            return Outcome(wire.error_result(message), "not-ready", pod.key, 0, message)
        refusal = runtime.gangs.refusal(pod)
        if refusal is not None:
            return _refuse_all(args, refusal, pod.key)
    cycle = runtime.engine.prepare(pod, runtime.state)
    if args.node_names is not None and cycle.passes_clear_nodes:
        # Every all-clear node passes: look only at the others (usually none of them).
        suspects, unknown = runtime.state.screen(args.node_names)
        infos = runtime.state.node_infos(suspects)[0] if suspects else []
    else:
        infos, unknown = _candidates(runtime, cache, args)
    decision = cycle.run(infos)
    for name in unknown:
        decision.failed[name] = unknown_node_status()
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    per_plugin: dict[str, int] = {}
    for name, status in decision.failed.items():
        (unresolvable if status.code == Code.UNRESOLVABLE else failed)[name] = status.reason
        per_plugin[status.plugin] = per_plugin.get(status.plugin, 0) + 1
    for plugin, count in per_plugin.items():
        metrics.FILTER_REJECTIONS.labels(plugin=plugin).inc(count)
    refused = decision.failed
    if args.node_names is not None:
        names = [n for n in args.node_names if n not in refused] if refused else args.node_names
        reply = wire.filter_result(node_names=names, failed=failed, unresolvable=unresolvable)
    elif isinstance(args.nodes, wire.SentNodeList):
        kept = args.nodes.kept([info.name not in refused for info in infos] if refused else None)
        reply = wire.filter_result(nodes=kept, failed=failed, unresolvable=unresolvable)
    else:
        nodes = _decoded_nodes(args)
        items = list(nodes["items"]) if not refused else [
            item for item, info in zip(nodes["items"], infos, strict=True) if info.name not in refused]
        reply = wire.filter_result(nodes={**nodes, "items": items}, failed=failed, unresolvable=unresolvable)
    total = len(args.node_names) if args.node_names is not None else len(infos)
    # kube-scheduler's own event already carries the "0/N nodes are available" summary of
    # these reasons; the access log only counts them, to keep the per-request path short.
    note = f"{len(decision.failed)}/{total} refused" if decision.failed else ""
    return Outcome(reply, "ok", pod.key, total, note)


def _refuse_all(args: wire.ExtenderArgs, reason: str, key: str) -> Outcome:
    """Every node refused as unresolvable (no preemption for it): a pod group that cannot
    complete now (docs/gangs.md)."""
    names = args.node_names if args.node_names is not None else _item_names(args.nodes)
    unresolvable = dict.fromkeys(names, reason)
    if args.node_names is not None:
        reply = wire.filter_result(node_names=[], failed={}, unresolvable=unresolvable)
    elif isinstance(args.nodes, wire.SentNodeList):
        reply = wire.filter_result(nodes=args.nodes.kept([False] * len(args.nodes.values)), failed={},
                                   unresolvable=unresolvable)
    else:
        reply = wire.filter_result(nodes={**_decoded_nodes(args), "items": []}, failed={}, unresolvable=unresolvable)
    metrics.FILTER_REJECTIONS.labels(plugin="PodGroup").inc(len(names))
    return Outcome(reply, "ok", key, len(names), reason)


def _item_names(nodes: Any) -> list[str]:
    if isinstance(nodes, wire.SentNodeList):
        return [view.name for view in nodes.values]
    names = []
    for index, item in enumerate(nodes["items"]):
        meta = item.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise WireError(f"invalid ExtenderArgs: Nodes.items.{index}: metadata.name: required")
        names.append(name)
    return names


def prioritize_verb(runtime: Runtime, cache: NodeViewCache, body: Any, *,
                    pods: PodViewCache | None = None) -> Outcome:
    args = wire.load_extender_args(body)
    pod = _pod(args.pod, pods)
    engine = runtime.engine
    if not engine.policy.scorers:  # the webhook default: kube-scheduler does the scoring
        names: Sequence[str] = args.node_names if args.node_names is not None else _item_names(args.nodes)
        return Outcome(_zero_scores(names), "ok", pod.key, len(names))
    infos, unknown = _candidates(runtime, cache, args)
    decision = engine.score(pod, infos, cluster=runtime.state)
    totals = {info.name: total for info, total in zip(decision.scored, decision.totals, strict=True)}
    names = args.node_names if args.node_names is not None else [i.name for i in infos]
    reply = wire.host_priorities([(name, totals.get(name, 0.0)) for name in names])
    return Outcome(reply, "ok", pod.key, len(names), f"{len(unknown)} unknown node(s)" if unknown else "")


# Refusals that a fresh read of the pod may lift: it is newer than our watch has delivered.
_STALE_POD = frozenset({"pod-unknown", "uid-mismatch"})
# How long the first /bind waits for the pod list it starts (kube-scheduler's httpTimeout is 5 s).
FIRST_BIND_LIST_WAIT = 2.0


def _pods_listed(runtime: Runtime, why: str = "the first /bind arrived") -> bool:
    """Binding checks the node's pods (ResourceFit, ports, devices), and pod groups count their
    members: a webhook whose policy reads no pods watches none until the first /bind (or pod
    group member's /filter) asks for them, and refuses, as retryable, until they are listed.
    kube-scheduler retries the pod after its backoff."""
    source = runtime.source
    if not source.pods_watched:
        source.begin_pod_watch(why)
    return source.pods_listed(FIRST_BIND_LIST_WAIT)


def bind_verb(runtime: Runtime, settings: Settings, body: Any) -> Outcome:
    args = wire.load_binding_args(body)
    key = f"{args.pod_namespace}/{args.pod_name}"
    if settings.enable_bind and not _pods_listed(runtime):
        message = "the extender is listing the cluster's pods for its first bind; retry shortly"
        metrics.BIND_OUTCOMES.labels(result="not-ready").inc()
        log.warning("refused bind of %s to %s: %s", key, args.node, message)
        return Outcome(wire.error_result(message), "refused", key, 1, message)
    refusal = refuse_bind(runtime, settings, args)  # includes --disable-bind
    if refusal is not None and refusal.code in _STALE_POD and runtime.source.refresh_pod(args.pod_namespace,
                                                                                          args.pod_name):
        refusal = refuse_bind(runtime, settings, args)  # kube-scheduler saw the pod before our watch did
    if refusal is not None:
        metrics.BIND_OUTCOMES.labels(result=refusal.code).inc()
        log.warning("refused bind of %s to %s: %s", key, args.node, refusal.message)
        return Outcome(wire.error_result(refusal.message), "refused", key, 1, refusal.message)
    record = runtime.state.pod(key)
    if record is not None and record.group is not None and record.view is not None \
            and runtime.gangs is not None and runtime.gangs.handles(record):
        waited = runtime.gangs.wait_to_bind(record.view, args.node)
        if waited is not None:
            metrics.BIND_OUTCOMES.labels(result="pod-group").inc()
            log.warning("refused bind of %s to %s: %s", key, args.node, waited)
            return Outcome(wire.error_result(waited), "refused", key, 1, waited)
    reserved = _reserve(runtime, key, args.node)
    if isinstance(reserved, str):
        metrics.BIND_OUTCOMES.labels(result="reserve-refused").inc()
        log.warning("refused bind of %s to %s: %s", key, args.node, reserved)
        return Outcome(wire.error_result(reserved), "refused", key, 1, reserved)
    try:
        steps.prebind(runtime.binder, reserved)
        runtime.binder.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node,
                            annotations=merged_annotations(reserved) or None)
    except ClusterError as exc:
        release_all(reserved)
        metrics.BIND_OUTCOMES.labels(result="api-error").inc()
        log.warning("bind of %s to %s failed: %s", key, args.node, exc)
        return Outcome(wire.error_result(str(exc)), "error", key, 1, str(exc))
    metrics.BIND_OUTCOMES.labels(result="bound").inc()
    return Outcome(wire.error_result(""), "ok", key, 1, f"bound to {args.node}")


def _reserve(runtime: Runtime, key: str, node: str) -> tuple[Reservation, ...] | str:
    """The policy's reservations for a bind refuse_bind let through, or why one plugin refused."""
    record = runtime.state.pod(key)
    if record is None or record.view is None or runtime.state.node_info(node) is None:
        return f"pod {key} or node {node} left the extender's state"
    outcome = steps.reserve(runtime.engine, runtime.state, record.view, node)
    if isinstance(outcome, Status):
        return f"node {node} refused at reserve for pod {key}: {outcome.reason}"
    return outcome


def _as_meta_victims(victims: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """NodeNameToVictims (full pods) in the MetaVictims shape the reply uses: UIDs only."""
    meta = {}
    for node, entry in victims.items():
        pods = []
        for index, victim in enumerate(entry.get("Pods") or []):
            metadata = victim.get("metadata")
            uid = metadata.get("uid") if isinstance(metadata, dict) else None
            if not isinstance(uid, str) or not uid:
                raise WireError(f"invalid ExtenderPreemptionArgs: NodeNameToVictims.{node}.Pods.{index}: "
                                "metadata.uid is required")
            pods.append({"UID": uid})
        meta[node] = {"Pods": pods, "NumPDBViolations": entry.get("NumPDBViolations", 0)}
    return meta


def preempt_verb(runtime: Runtime, body: Any) -> Outcome:
    """Keep kube-scheduler's candidates, minus nodes our filters refuse for reasons eviction cannot fix."""
    args = wire.load_preemption_args(body)
    pod = _pod(args.pod)
    candidates = args.meta_victims if args.meta_victims is not None else _as_meta_victims(args.victims or {})
    infos, _unknown = runtime.state.node_infos(candidates)
    decision = runtime.engine.filter(pod, infos, runtime.state)
    hopeless = {name for name, status in decision.failed.items() if status.code == Code.UNRESOLVABLE}
    kept = {node: v for node, v in candidates.items() if node not in hopeless}
    note = f"dropped {sorted(hopeless)}" if hopeless else ""
    return Outcome(wire.preemption_result(kept), "ok", pod.key, len(candidates), note)
