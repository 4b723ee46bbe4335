"""The steps after a decision, written once: Reserve, assume, then PreBind and bind, or give back.

kube-scheduler v1.36's schedulingCycle ends with RunReservePluginsReserve and assume; its
bindingCycle runs PreBind and Bind, and any failure runs Unreserve and forgets the pod. Here a
plugin's Reserve returns a `Reservation` (extender.policy.reservations): its `release` is the
plugin's Unreserve, its `actions` are PreBind's API writes (described as data, carried out by the
mode's binder), its `undo` takes those writes back. The standalone scheduler, its group cycle,
simulate and the webhook's bind verb all take a place through this module, so DRA's claim
reservation and volume binding plug in once, as Reserve plugins.

Pure: the cluster state the place is assumed on and the binder that writes are the mode's
(`PlaceHost`, `Binder`); nothing here does IO or reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from extender.model.pods import PodView
from extender.policy.cluster_view import ClusterView
from extender.policy.engine import Engine
from extender.policy.reservations import Reservation, all_actions, merged_annotations, release_all
from extender.policy.status import Code, Status


class PlaceHost(Protocol):
    """The mode's cluster state, where a place is counted before the API server confirms it."""

    def assume(self, key: str, node_name: str, *, uid: str = "", view: PodView | None = None) -> Any: ...

    def forget(self, key: str) -> None: ...


class Binder(Protocol):
    """The mode's writer: the API server, or simulate's in-memory cluster."""

    def prebind(self, actions: Sequence[Any]) -> None:
        """Carry out reservations' bind-time actions before the bind; raise ClusterError if not."""

    def bind(self, namespace: str, name: str, uid: str, node: str, *,
             annotations: Mapping[str, str] | None = None) -> None:
        """Bind the pod to the node or raise ClusterError (ConflictError, NotFoundError, ...).

        `annotations` go on the Binding, and from there onto the pod, in the same request."""


@dataclass(frozen=True, slots=True)
class Taken:
    """A pod reserved and assumed on `node`, not bound yet."""

    pod: PodView
    node: str
    reservations: tuple[Reservation, ...]


def reserve(engine: Engine, cluster: ClusterView, pod: PodView, node: str) -> tuple[Reservation, ...] | Status:
    """Reserve on the chosen node: every plugin's claim, or the refusal that released the claims
    made before it. A node deleted since the decision refuses too. Raises PluginError."""
    info = cluster.node_info(node)
    if info is None:
        return Status(Code.UNSCHEDULABLE, (f"node {node} no longer exists",))
    outcome = engine.reserve(pod, info, cluster)
    return outcome if isinstance(outcome, Status) else tuple(outcome)


def assume(host: PlaceHost, pod: PodView, node: str, reservations: Sequence[Reservation]) -> Taken:
    """Count the pod on `node` at once, so the next cycle sees its room taken."""
    host.assume(pod.key, node, uid=pod.uid, view=pod)
    return Taken(pod, node, tuple(reservations))


def take(engine: Engine, cluster: ClusterView, host: PlaceHost, pod: PodView, node: str) -> Taken | Status:
    """Reserve, then assume; the refusal when a plugin refuses at Reserve. Raises PluginError."""
    reserved = reserve(engine, cluster, pod, node)
    if isinstance(reserved, Status):
        return reserved
    return assume(host, pod, node, reserved)


def give_back(host: PlaceHost, taken: Taken) -> None:
    """Unreserve (in reverse order), then forget the assumption: the pod is pending again. The
    assumption is forgotten even when a plugin's release fails (its error is raised after)."""
    try:
        release_all(taken.reservations)
    finally:
        host.forget(taken.pod.key)


def prebind(binder: Binder, reservations: Sequence[Reservation]) -> None:
    """PreBind: the reservations' API writes, in order (none: no call). Raises ClusterError."""
    actions = all_actions(reservations)
    if actions:
        binder.prebind(actions)


def bind(binder: Binder, pod: PodView, node: str, reservations: Sequence[Reservation]) -> None:
    """The Binding, with the annotations the reservations set (copied onto the pod by the API
    server in the same request). Raises ClusterError."""
    binder.bind(pod.namespace, pod.name, pod.uid, node, annotations=merged_annotations(reservations) or None)
