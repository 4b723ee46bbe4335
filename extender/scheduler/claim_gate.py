"""DynamicResources' PreEnqueue in the standalone queue: pods whose claims are not there yet wait untried.

kube-scheduler keeps a pod out of its active queue while a claim it names does not exist, is
being deleted, or (from a template) is not made yet or not owned by the pod
(pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, PreEnqueue). Such a pod
is not attempted, so it gathers no backoff: when the claim appears (a claim event) or the
pod's status names it (a pod update), it is tried at once. Trying it and sending it to the
unschedulable queue instead would make it wait out a backoff after its claim arrives, which is
most of a template pod's scheduling latency under load.

The queue asks `admits(pod)` with its lock held; the scheduler hands the gate each claim event
(`waiting_on`) and ungates the pods it names.
"""

from __future__ import annotations

import threading

from extender.model.pods import PodView
from extender.policy.builtin.dynamic_resources import pre_enqueue
from extender.policy.dra_view import DraView


class ClaimGate:
    def __init__(self, dra: DraView) -> None:
        self.dra = dra
        self._lock = threading.Lock()
        self._by_claim: dict[str, set[str]] = {}  # claim key -> pods waiting for it
        self._claim_of: dict[str, str] = {}  # pod key -> the claim it waits for

    def admits(self, pod: PodView) -> bool:
        """Whether the pod's claims allow it to be tried now; if not, remember what it waits for."""
        waiting = pre_enqueue(pod, self.dra)
        if waiting is None and pod.key not in self._claim_of:
            return True  # the common case, every pod without claims: no lock, nothing to forget
        with self._lock:
            self._forget(pod.key)
            if waiting is not None and waiting.claim:
                self._by_claim.setdefault(waiting.claim, set()).add(pod.key)
                self._claim_of[pod.key] = waiting.claim
        return waiting is None

    def waiting_on(self, claim: str) -> list[str]:
        """The pods held for this claim (all of them for "", a full list of claims)."""
        with self._lock:
            if not claim:
                keys = list(self._claim_of)
                self._by_claim.clear()
                self._claim_of.clear()
                return keys
            keys = list(self._by_claim.pop(claim, ()))
            for key in keys:
                self._claim_of.pop(key, None)
            return keys

    def _forget(self, key: str) -> None:
        claim = self._claim_of.pop(key, None)
        if claim is not None:
            waiting = self._by_claim.get(claim)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self._by_claim[claim]
