"""Which PersistentVolume an unbound claim would get on a node: FindMatchingVolume, per pod then per node.

kube-scheduler loops over every volume of the claim's class for every node (in parallel,
in Go). With thousands of local volumes, that is millions of checks per pod in Python.
The same decision is split in two here:

* once per pod and claim (`VolumeCandidates.of`), the checks that do not depend on the
  node: taken by another claim, too small, volume mode, attributes class, being deleted,
  then, for volumes not pre-bound to the claim, phase Available, selector, class and
  access modes;
* per node (`match`), the node affinity, looked up through an index: a volume whose
  affinity is one term with an `In` expression (a local volume's hostname, a zone) is
  filed under that key and each of its values, so a node only looks at the volumes
  that name one of its label values, plus the few volumes whose affinity cannot be filed.

The answer is FindMatchingVolume's: a volume pre-bound to the claim decides alone (it,
if the node is in its affinity, else none); otherwise the smallest fitting volume, the
first of the class's list among equals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extender.model.volumes import Claim, NodeAffinity, Volume

Candidate = tuple[int, Volume]  # (position in the class's list, volume)


def _anchor(affinity: NodeAffinity) -> tuple[str, frozenset[str]] | None:
    """The (key, values) of an `In` expression every matching node must satisfy, if there is one."""
    if affinity.error or len(affinity.terms) != 1:
        return None
    term = affinity.terms[0]
    for requirement in term.expressions:
        if requirement.operator == "In" and isinstance(requirement.values, frozenset):
            return requirement.key, requirement.values
    return None


def _fits(claim: Claim, volume: Volume) -> bool:
    """FindMatchingVolume's checks that come before the node affinity, for any volume."""
    if volume.claim_ref is not None and not volume.bound_to(claim):
        return False
    if volume.capacity < claim.size or volume.volume_mode != claim.volume_mode:
        return False
    return volume.attributes_class == claim.attributes_class and not volume.deleting


def _available_for(claim: Claim, volume: Volume) -> bool:
    """The checks an unbound (not pre-bound) volume must also pass, apart from node affinity."""
    if volume.phase != "Available":
        return False
    if claim.selector is not None and not claim.selector.matches(volume.labels):
        return False
    return volume.class_name == claim.class_name and claim.access_modes <= volume.access_modes


@dataclass
class VolumeCandidates:
    """The volumes that could serve one claim, filed for per-node lookup."""

    prebound: list[Volume] = field(default_factory=list)
    anywhere: list[Candidate] = field(default_factory=list)  # no node affinity, or one that cannot be filed
    pinned: dict[str, dict[str, list[Candidate]]] = field(default_factory=dict)  # key -> value -> candidates

    @classmethod
    def of(cls, claim: Claim, volumes: Sequence[Volume]) -> VolumeCandidates:
        found = cls()
        for position, volume in enumerate(volumes):
            if not _fits(claim, volume):
                continue
            if volume.bound_to(claim):
                found.prebound.append(volume)
                continue
            if not _available_for(claim, volume):
                continue
            anchor = _anchor(volume.node_affinity) if volume.node_affinity is not None else None
            if anchor is None:
                found.anywhere.append((position, volume))
                continue
            key, values = anchor
            by_value = found.pinned.setdefault(key, {})
            for value in values:
                by_value.setdefault(value, []).append((position, volume))
        return found

    def match(self, labels: Mapping[str, str], excluded: set[str]) -> Volume | None:
        """The volume the claim gets on a node with `labels`, `excluded` being taken already."""
        for volume in self.prebound:
            if volume.name not in excluded:
                return volume if volume.affinity_matches(labels) else None
        best: Candidate | None = None
        for candidates in self._near(labels):
            for candidate in candidates:
                position, volume = candidate
                if volume.name in excluded or not volume.affinity_matches(labels):
                    continue
                if best is None or (volume.capacity, position) < (best[1].capacity, best[0]):
                    best = candidate
        return best[1] if best is not None else None

    def _near(self, labels: Mapping[str, str]) -> list[list[Candidate]]:
        lists = [self.anywhere]
        for key, by_value in self.pinned.items():
            value = labels.get(key)
            if value is not None:
                found = by_value.get(value)
                if found:
                    lists.append(found)
        return lists
