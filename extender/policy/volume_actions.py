"""The bind-time work VolumeBinding's Reserve describes (kube-scheduler's PreBind for volumes).

Plain data, carried out in order by the binder of each mode through
`extender.cluster.prebinding` (handlers in `extender.kube.volume_prebind`):

0. `CheckVolumes`: the claims that were already bound must still be, to volumes the node
   can reach (nothing is written; kube-scheduler skips this, but a claim deleted or a
   volume changed between the decision and the bind would leave a pod that cannot start);
1. `BindVolume`: set a chosen PersistentVolume's `claimRef` to the claim (static
   provisioning); the PV controller then completes the binding;
2. `SelectNode`: annotate a claim with `volume.kubernetes.io/selected-node` (dynamic
   provisioning, WaitForFirstConsumer); the external provisioner then creates a volume
   that node can reach, and the PV controller binds it;
3. `AwaitVolumes`: wait, at most `timeout` seconds, until every one of those claims is
   bound, checking on the way that nothing undid the work (claimRef reset, the
   selected-node annotation removed by a failed provisioner) and that each volume can
   be reached from the node; only then is the pod bound.

Each carries the resourceVersion the decision was made on: an object that changed
since then is not written, and the pod is scheduled again, as kube-scheduler's
Update with the cached object fails with a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.model.volumes import ClaimRef


@dataclass(frozen=True, slots=True)
class CheckVolumes:
    node: str
    bound: tuple[tuple[str, ClaimRef], ...]  # (volume name, claim) of the claims bound at decision time


@dataclass(frozen=True, slots=True)
class BindVolume:
    volume: str
    volume_version: str  # the PV's resourceVersion when it was chosen
    claim: ClaimRef  # with the claim's uid and resourceVersion, as GetReference puts them


@dataclass(frozen=True, slots=True)
class SelectNode:
    claim: ClaimRef  # resource_version: the claim's when it was chosen
    node: str
    storage_class: str = ""  # must still exist and allow the node (its allowedTopologies)


@dataclass(frozen=True, slots=True)
class AwaitVolumes:
    namespace: str
    pod: str
    pod_uid: str
    node: str
    bindings: tuple[tuple[str, ClaimRef], ...]  # (volume name, claim) set by BindVolume
    provisions: tuple[ClaimRef, ...]  # claims annotated by SelectNode
    timeout: float  # seconds (VolumeBinding's bindTimeoutSeconds)

    @property
    def claims(self) -> list[str]:
        return [ref.key for _, ref in self.bindings] + [ref.key for ref in self.provisions]
