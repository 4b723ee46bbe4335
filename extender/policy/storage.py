"""What the volume plugins may read (and assume) about claims, volumes, classes and CSI objects.

kube-scheduler's volume plugins read PersistentVolumeClaims, PersistentVolumes,
StorageClasses and CSI objects through listers, and VolumeBinding keeps an *assume
cache* on top of two of them: once a pod is reserved on a node, the PV chosen for its
claim is taken (its `claimRef` set) and a claim to provision carries the node chosen
for it, in memory, before any API write, so the next pod sees them. `ClusterView.storage()`
gives plugins the same thing through this interface, implemented by the cluster
state's volume store (`extender.cluster.volume_store`); `EMPTY_STORAGE` holds nothing.

An assumed object replaces the stored one only while the stored one keeps the
resourceVersion it was assumed from: as soon as the watch delivers a newer version
(our own write, or anyone's), the assumption is void, as in kube-scheduler's
passive assume cache. `restore_*` drops an assumption (Unreserve).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from extender.model.volumes import (
    Claim,
    CSIDriver,
    CSINode,
    StorageCapacity,
    StorageClass,
    Volume,
    VolumeAttachment,
)


class StorageView(Protocol):
    def claim(self, namespace: str, name: str) -> Claim | None:
        """The claim, with an assumed version (a selected node) in place of the stored one."""

    def volume(self, name: str) -> Volume | None:
        """The volume, with an assumed version (a claimRef) in place of the stored one."""

    def volumes_of_class(self, class_name: str) -> Sequence[Volume]:
        """Every volume of a storage class ("" = no class), assumed versions included."""

    def storage_class(self, name: str) -> StorageClass | None: ...

    def csi_node(self, name: str) -> CSINode | None: ...

    def csi_driver(self, name: str) -> CSIDriver | None: ...

    def capacities_of_class(self, class_name: str) -> Sequence[StorageCapacity]: ...

    def attachments_on(self, node: str) -> Sequence[VolumeAttachment]: ...

    def assume_volume(self, volume: Volume) -> None:
        """Take `volume` as given until the watch delivers a newer version; ValueError when the
        stored volume is gone or newer than the one `volume` was derived from."""

    def assume_claim(self, claim: Claim) -> None:
        """As assume_volume, for a claim."""

    def restore_volume(self, volume: Volume) -> None:
        """Drop the assumption made with `volume`, unless a newer one replaced it."""

    def restore_claim(self, claim: Claim) -> None: ...


class _EmptyStorage:
    """No storage objects: every claim a pod names is missing."""

    def claim(self, namespace: str, name: str) -> Claim | None:
        return None

    def volume(self, name: str) -> Volume | None:
        return None

    def volumes_of_class(self, class_name: str) -> Sequence[Volume]:
        return ()

    def storage_class(self, name: str) -> StorageClass | None:
        return None

    def csi_node(self, name: str) -> CSINode | None:
        return None

    def csi_driver(self, name: str) -> CSIDriver | None:
        return None

    def capacities_of_class(self, class_name: str) -> Sequence[StorageCapacity]:
        return ()

    def attachments_on(self, node: str) -> Sequence[VolumeAttachment]:
        return ()

    def assume_volume(self, volume: Volume) -> None:
        raise ValueError(f"persistentvolume {volume.name!r} is not known")

    def assume_claim(self, claim: Claim) -> None:
        raise ValueError(f"persistentvolumeclaim {claim.key!r} is not known")

    def restore_volume(self, volume: Volume) -> None:
        return None

    def restore_claim(self, claim: Claim) -> None:
        return None


EMPTY_STORAGE: StorageView = _EmptyStorage()
