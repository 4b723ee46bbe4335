"""`extender explain`: why would this pod go where it goes, and why not anywhere else.

The pod comes from a file or is named as NAMESPACE/NAME; the cluster is a snapshot
(the embedded one by default) or a live API server (`--kubeconfig`/`--context`),
read once with plain list calls (nodes, pods and the storage objects the volume
filters read) and nothing written back. The policy is a file or
the built-in default of `--mode`. A pod that is already in the cluster is taken out
of it first, so its own requests do not count against the node it is on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from extender.cluster.snapshot import Snapshot, load_into, read_snapshot
from extender.cluster.state import ClusterState
from extender.errors import ExtenderError, InvalidObject, NotFoundError, PolicyError
from extender.explain.explanation import Explanation, explain_pod, render_table, to_json
from extender.model.fields import metadata_of
from extender.model.podgroups import GroupKey, parse_pod_group
from extender.model.pods import PodView
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine, Policy
from extender.policy.loading import load_policy_file
from extender.settings import default_snapshot
from extender.simulation.gangnotes import group_note

__all__ = ["explain", "policy_from_option"]

# Finished pods hold no resources; leaving them out keeps a big cluster's list small.
_LIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


def policy_from_option(path: str | None, mode: str = "standalone") -> Policy:
    """The policy a command runs: the file when given, else the built-in default of `mode`."""
    try:
        if path:
            return load_policy_file(path)
        return default_policy(mode)
    except PolicyError as exc:
        raise click.ClickException(str(exc)) from None


def _split_name(target: str) -> tuple[str, str]:
    namespace, sep, name = target.partition("/")
    if not sep:
        return "default", target
    if not namespace or not name or "/" in name:
        raise click.BadParameter(f"{target!r} is neither a pod file nor NAMESPACE/NAME", param_hint="POD")
    return namespace, name


def _key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _live_cluster(kubeconfig: str | None, context: str | None) -> tuple[Any, Snapshot]:
    # late: the kubernetes client costs ~0.3 s to import, and `extender explain --help` (which imports
    # this module) needs none of it
    from extender.kube.client import build_api_client, request_json
    from extender.startup import reach_api_server

    api_client = build_api_client(kubeconfig, context)
    reach_api_server(api_client)
    nodes = request_json(api_client, "GET", "/api/v1/nodes").get("items") or []
    pods = request_json(api_client, "GET", "/api/v1/pods",
                        query={"fieldSelector": _LIVE_PODS_SELECTOR}).get("items") or []
    for kind, items in (("Node", nodes), ("Pod", pods)):
        for item in items:
            item.setdefault("kind", kind)  # list items carry no kind
    return api_client, Snapshot(nodes=nodes, pods=pods, storage=_live_storage(api_client))


def _live_storage(api_client: Any) -> dict[str, list[dict[str, Any]]]:
    """The objects the volume filters read; a kind that cannot be listed is an error, not a blank
    (a claim missing from the lists would be explained as "not found")."""
    # late: the kubernetes client, ~0.3 s (see _live_cluster)
    from extender.kube.client import request_json
    from extender.kube.volume_source import STORAGE_PATHS

    storage = {}
    for resource, path in STORAGE_PATHS.items():
        try:
            storage[resource] = request_json(api_client, "GET", path).get("items") or []
        except ExtenderError as exc:
            raise ExtenderError(f"cannot list {resource} for the volume filters: {exc}") from None
    return storage


def _find_pod(target: str, snapshot: Snapshot, api_client: Any) -> dict[str, Any]:
    namespace, name = _split_name(target)
    key = f"{namespace}/{name}"
    for pod in snapshot.pods:
        if _key(pod) == key:
            return pod
    if api_client is not None:
        # late: the kubernetes client, ~0.3 s (see _live_cluster)
        from extender.kube.client import request_json

        try:
            return request_json(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except NotFoundError:
            pass
    where = "the cluster" if api_client is not None else "the snapshot"
    raise click.ClickException(f"pod {key} is not in {where}, and no file {target!r} exists")


def _group_notes(pod: PodView, cluster: Snapshot, api_client: Any) -> list[str]:
    """The pod's group, quorum and what it waits for (docs/gangs.md), from the cluster or the snapshot."""
    if pod.group is None:
        return []
    if api_client is None:
        raw_group = _snapshot_group(cluster, pod.group)
        try:
            group = parse_pod_group(raw_group, pod.group.api) if raw_group is not None else None
        except InvalidObject as exc:
            return [f"pod group {pod.group}: cannot read it: {exc}"]
        return [group_note(pod, group, cluster.pods)]
    # late: the kubernetes client, ~0.3 s (see _live_cluster)
    from extender.kube.client import request_json
    from extender.kube.podgroup_source import podgroups_path

    try:
        raw = request_json(api_client, "GET", podgroups_path(pod.group.api, pod.group.namespace, pod.group.name))
        group = parse_pod_group(raw, pod.group.api)
    except NotFoundError:
        group = None
    except (ExtenderError, InvalidObject) as exc:
        return [f"pod group {pod.group}: cannot read it: {exc}"]
    return [group_note(pod, group, cluster.pods)]


def _snapshot_group(cluster: Snapshot, key: GroupKey) -> dict[str, Any] | None:
    """The snapshot's object for `key` (its API, namespace and name), if it has one."""
    for raw in cluster.pod_groups:
        meta = metadata_of(raw)
        if (raw.get("apiVersion"), meta.get("namespace"), meta.get("name")) == \
                (key.api, key.namespace, key.name):
            return raw
    return None


def _explain_one(engine: Engine, state: ClusterState, raw: dict[str, Any], label: str,
                 cluster: Snapshot, usage_notes: list[str], api_client: Any = None) -> Explanation:
    try:
        pod = PodView.from_dict(raw)
    except InvalidObject as exc:
        raise click.ClickException(f"{label}: {exc}") from None
    notes = [*usage_notes, *_group_notes(pod, cluster, api_client)]
    record = state.pod(pod.key)
    if record is not None:
        if record.node_name:
            notes.append(f"{pod.key} is on {record.node_name} now; explained as if it were pending "
                         "(its own requests are not counted there)")
        state.delete_pod(pod.key)
    explanation = explain_pod(engine, pod, state.all_node_infos(), cluster=state, notes=notes)
    if record is not None:  # put the cluster's copy back for the next pod of the file
        state.upsert_pod(next(p for p in cluster.pods if _key(p) == pod.key))
    return explanation


@click.command()
@click.argument("target", metavar="POD_FILE|NAMESPACE/NAME")
@click.option("--snapshot", type=click.Path(exists=True), default=None,
              help="Cluster snapshot file or directory (default: the embedded config/snapshot.yaml).")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Read nodes, pods and storage objects from this cluster instead of a snapshot.")
@click.option("--context", default=None, help="kubeconfig context (implies a live cluster).")
@click.option("--policy", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Policy file (default: the built-in policy of --mode).")
@click.option("--mode", type=click.Choice(["standalone", "webhook"]), default="standalone", show_default=True,
              help="Which built-in policy to use when --policy is not given.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def explain(target: str, snapshot: str | None, kubeconfig: str | None, context: str | None,
            policy: str | None, mode: str, output: str) -> None:
    """Show, node by node, which filter refused the pod and how each scorer rated the rest.

    POD_FILE is a YAML/JSON file with one or more Pods; NAMESPACE/NAME (or NAME, in
    namespace default) is looked up in the snapshot or the live cluster. Scores: each
    scorer gives 0..100, TOTAL is their weighted average, WIRE the 0..10 integer the
    webhook's /prioritize would send kube-scheduler.
    """
    live = kubeconfig is not None or context is not None
    if live and snapshot:
        raise click.UsageError("--snapshot and --kubeconfig/--context are alternatives: give one")
    engine = Engine(policy_from_option(policy, mode))
    try:
        api_client, cluster = _live_cluster(kubeconfig, context) if live else \
            (None, read_snapshot(snapshot or default_snapshot()))
        path = Path(target)
        if path.is_file():
            # late: loads the kubernetes client (through usage.offline), ~0.3 s (see _live_cluster)
            from extender.simulation.simulating import read_pods

            pods = read_pods(path)
            if not pods:
                raise click.ClickException(f"{target}: no Pod objects in the file")
        else:
            pods = [_find_pod(target, cluster, api_client)]
    except ExtenderError as exc:
        raise click.ClickException(str(exc)) from None
    state = ClusterState()
    load_into(state, cluster)
    # late: loads the kubernetes client (through usage.metrics_api), ~0.3 s (see _live_cluster)
    from extender.usage.offline import live_usage, snapshot_usage

    usage_notes = live_usage(state, api_client, engine.policy) if live else \
        snapshot_usage(state, cluster.node_metrics, engine.policy, count_placements=False)
    explanations = [_explain_one(engine, state, raw, f"{target} pod #{i}", cluster, usage_notes, api_client)
                    for i, raw in enumerate(pods)]
    if output == "json":
        body: Any = to_json(explanations[0]) if len(explanations) == 1 else \
            {"items": [to_json(e) for e in explanations]}
        click.echo(json.dumps(body, indent=2))
    else:
        click.echo("\n".join(render_table(e) for e in explanations), nl=False)
