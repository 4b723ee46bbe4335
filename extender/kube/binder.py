"""Binding pods through the API server's Binding subresource, with the MemoryBinder's errors.

The reply (a Status) is read raw: the python client's create_namespaced_pod_binding
fails to deserialize it. kube-apiserver reports every refused bind as a 409 whose
message names the cause; those messages are turned into the short ones the rest
of the project (and MemoryBinder) uses, so callers can log and drop without parsing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from kubernetes import client as k8s_client

from extender.cluster import prebinding
from extender.cluster.state import ClusterState
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.kube import claim_binding, deviceledger, volume_prebind
from extender.kube import client as kube_client
from extender.model.devices import LedgerClaim

log = logging.getLogger(__name__)

BIND_TIMEOUT = (5.0, 30.0)
_ASSIGNED = re.compile(r"is already assigned to node \"?([^\"\s]+)\"?")


def binding_body(namespace: str, name: str, uid: str, node: str,
                 annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The v1 Binding: `metadata.uid` makes the server refuse a pod recreated under the same name."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def _translate(error: ClusterError, key: str, node: str) -> ClusterError:
    """Map the API server's refusal onto a short message that says what to do about it."""
    message = getattr(error, "server_message", "") or str(error)
    status, reason = error.status, error.reason
    if isinstance(error, NotFoundError):
        return NotFoundError(f"pod {key} not found", status=status, reason=reason)
    if isinstance(error, ConflictError):
        lowered = message.lower()
        found = _ASSIGNED.search(message)
        if found:
            text = f"pod {key} is already assigned to node {found.group(1)}"
        elif "precondition" in lowered and "uid" in lowered:
            text = f"pod {key} was recreated (UID mismatch)"
        elif "being deleted" in lowered:
            text = f"pod {key} is being deleted"
        elif "schedulinggates" in lowered or "scheduling gates" in lowered:
            text = f"pod {key} still has scheduling gates"
        else:
            text = f"pod {key} cannot be bound to node {node}: {message}"
        return ConflictError(text, status=status, reason=reason)
    if error.status is None:
        return ClusterError(f"binding pod {key} to node {node} failed: {error}", status=None)
    return type(error)(f"binding pod {key} to node {node} failed: {status} {reason}: {message}",
                       status=status, reason=reason)


def api_server_actions(api_client: Any) -> dict[type, prebinding.Handler]:
    """Every bind-time action carried out against the API server: the volume actions, the
    resource claims' allocations (claim_binding.py), and the
    device ledger's record of a GPU share (the arbiter between processes), in the ledger
    configured for `api_client` when the action runs (`deviceledger.configure` may come later)."""
    return {**volume_prebind.api_server_handlers(api_client), **claim_binding.api_server_handlers(api_client),
            LedgerClaim: lambda claim: deviceledger.ledger_for(api_client).record(claim)}


class KubeBinder:
    """The Binder for a live cluster: POST the Binding, then assume the pod until the watch confirms it."""

    kind = "kube"

    def __init__(self, api_client: k8s_client.ApiClient, state: ClusterState,
                 actions: prebinding.Handlers | None = None) -> None:
        self.api_client = api_client
        self.state = state
        self.actions = api_server_actions(api_client) if actions is None else actions

    def bind(self, namespace: str, name: str, uid: str, node: str, *,
             annotations: Mapping[str, str] | None = None) -> None:
        """Bind or raise: ConflictError (already assigned, UID mismatch, deleting, gated: do not
        retry), NotFoundError (pod gone), ClusterError with `retryable` (429, 5xx, network)."""
        key = f"{namespace}/{name}"
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/binding"
        try:
            kube_client.request_json(self.api_client, "POST", path,
                                     body=binding_body(namespace, name, uid, node, annotations),
                                     timeout=BIND_TIMEOUT)
        except ClusterError as exc:
            raise _translate(exc, key, node) from exc
        record = self.state.pod(key)
        self.state.assume(key, node, uid=uid or (record.uid if record else ""),
                          scheduler_name=record.scheduler_name if record else "")
        log.debug("bound %s to %s", key, node)

    def prebind(self, actions: Sequence[Any]) -> None:
        prebinding.run(actions, self.actions, where="API server")
