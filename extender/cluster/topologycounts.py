"""Placed pods counted per topology domain, kept up to date instead of recounted per pod.

InterPodAffinity needs, for every pod it schedules, how many placed pods of some kind sit
in each topology domain (topology key -> label value -> pods): the pods matching the
incoming pod's terms, and the pods whose own terms match the incoming pod. kube-scheduler
recounts them in every PreFilter/PreScore; in Python that walk over thousands of pods was
40 % of a 5,000-node scheduler's time. These counters are maintained by the pod index
(extender/cluster/podindex.py) on every pod add and remove, and when a node's labels
change, so a scheduling cycle copies a few dicts instead.

Two kinds:

* `GroupCounts`: the pods sharing one interned `PodAffinity`, counted for every topology
  key its terms use. Which of those terms concern the incoming pod is decided per cycle
  (it depends on that pod); how many group pods sit in each domain does not.
* `SelectorCounts`: the pods matching every (namespaces, selector) of a tuple of terms,
  counted for the given keys. Created on the first request for that combination and
  kept while it is asked for (see PodIndex.counts).
* `NodeCounts`: for PodTopologySpread, the pods of one namespace that a spread rule counts
  (its selector, or the default rule's controller), per node, terminating pods left out (they
  do not count towards a spread, in kube-scheduler). Per node rather than per domain: which
  nodes count depends on the incoming pod (its node affinity and tolerations, the inclusion
  policies), so the cycle sums the eligible nodes' counts into domains.

A pod on a node the index has no labels for (unknown or deleted node) is in no domain, as
kube-scheduler only counts pods of the nodes in its snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.model.affinity import Counts
from extender.model.pods import TERMINAL_PHASES
from extender.model.records import PodRecord
from extender.model.selectors import LabelSelector

Selection = tuple[tuple[frozenset[str], LabelSelector], ...]  # (namespaces, selector) of each term, ANDed


class GroupCounts:
    """The placed pods sharing one set of affinity terms, and where they are."""

    __slots__ = ("keys", "pods", "counts")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys  # every topology key of the group's terms
        self.pods: set[str] = set()
        self.counts: Counts = {}


class SelectorCounts:
    """The placed pods matching every term of a selection, per domain of each of `keys`."""

    __slots__ = ("selection", "keys", "namespaces", "counts", "used")

    def __init__(self, selection: Selection, keys: tuple[str, ...]) -> None:
        self.selection = selection
        self.keys = keys
        namespaces = selection[0][0]
        for names, _ in selection[1:]:
            namespaces = namespaces & names
        self.namespaces = namespaces  # a pod must be in every term's namespaces
        self.counts: Counts = {}
        self.used = 0  # the index's read tick when last asked for

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod of one of `namespaces` with `labels` is counted."""
        for _, selector in self.selection:
            if not selector.matches(labels):
                return False
        return True


SpreadKey = tuple[str, LabelSelector | None, tuple[str, str] | None]  # namespace, selector, controller


class NodeCounts:
    """The placed, not terminating pods of `namespace` matching `selector` (or owned by the
    controller `owner`), per node name."""

    __slots__ = ("namespace", "selector", "owner", "counts", "used")

    def __init__(self, key: SpreadKey) -> None:
        self.namespace, self.selector, self.owner = key
        self.counts: dict[str, int] = {}
        self.used = 0  # the index's read tick when last asked for

    def counted(self, record: PodRecord) -> bool:
        """Whether `record` (a pod of `namespace`) is counted: placed, not finished, not
        terminating, and selected."""
        if not record.node_name or record.deleting or record.phase in TERMINAL_PHASES:
            return False
        if self.owner is not None:
            return record.owner == self.owner
        return self.selector is not None and self.selector.matches(record.labels)

    def add(self, node: str, delta: int) -> None:
        count = self.counts.get(node, 0) + delta
        if count > 0:
            self.counts[node] = count
        else:
            self.counts.pop(node, None)
