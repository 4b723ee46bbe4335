"""Queueing hints: which waiting pods a cluster event may help, asked of the plugins that refused them.

kube-scheduler asks each plugin that refused a waiting pod whether an event may change its
answer (the plugin's QueueingHintFn), and moves the pod only on a yes. Deleting a pod frees
its cpu and memory for every pod, but its host ports only for pods that want those ports,
its spread and anti-affinity counts only for pods whose selectors match it, its volumes only
for pods limited by volumes. Without these answers, each of thousands of deletions sends
every waiting pod through another failing cycle (EventHandlingPodDelete: 1.8 × the failed
cycles of kube-scheduler, and 0.8 × its throughput).

The plugins say it themselves, next to their filters (`events_to_register`, policy/enqueue.py);
this module only gathers what the profiles' policies registered (`Policy.registered_events`)
into one answer table per event. For each plugin an event's answer is no (it did not
register for the event), yes (it registered without a hint, or registered nothing at all,
as a third-party plugin may), or its hints, asked with the pod and the changed object. A
name no policy knows (a plugin of a policy since reloaded) answers yes.

The hints run with the scheduling queue's lock held, once per waiting pod per event, so
they read only the two objects and stop at the first yes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from extender.model.pods import PodView
from extender.policy.engine import Policy
from extender.policy.enqueue import ClusterEvent, EventHint, Hint
from extender.scheduler.queueing import Wakes

# One plugin's answer to one event: no, yes, or ask these hints.
Answer = bool | tuple[Hint, ...]


def _answer(registered: tuple[EventHint, ...] | None, event: ClusterEvent) -> Answer:
    if registered is None:
        return True
    matching = [r for r in registered if r.matches(event)]
    if not matching:
        return False
    hints = tuple(r.hint for r in matching if r.hint is not None)
    return True if len(hints) < len(matching) else hints


def _either(one: Answer, other: Answer) -> Answer:
    """The answer to an event made of two (a node update of two parts): yes if either says yes."""
    if one is True or other is True:
        return True
    if isinstance(one, tuple) and isinstance(other, tuple):
        return one + tuple(hint for hint in other if hint not in one)
    return other if one is False else one


class QueueingHints:
    """The registered events of every plugin that may refuse a pod, by its name."""

    def __init__(self, registered: Mapping[str, Sequence[EventHint] | None]) -> None:
        self._registered = {name: None if events is None else tuple(events) for name, events in registered.items()}
        # Filled on first use, from the watch threads: a race only builds an equal table twice.
        self._tables: dict[tuple[str, frozenset[str]], dict[str, Answer]] = {}
        self._split: dict[tuple[str, frozenset[str]], _Split] = {}

    @classmethod
    def of(cls, policies: Iterable[Policy]) -> QueueingHints:
        """The hints of every profile's policy: a name two policies share gets both registrations
        (and says nothing when either says nothing)."""
        merged: dict[str, list[EventHint] | None] = {}
        for policy in policies:
            for name, events in policy.registered_events().items():
                if events is None or (name in merged and merged[name] is None):
                    merged[name] = None
                else:
                    found = merged.setdefault(name, [])
                    assert found is not None
                    found.extend(e for e in events if e not in found)
        return cls(merged)

    def table(self, resource: str, actions: frozenset[str]) -> dict[str, Answer]:
        """Each known plugin's answer to `actions` on `resource` (any of them)."""
        key = (resource, actions)
        table = self._tables.get(key)
        if table is None:
            table = {}
            for action in actions:
                event = ClusterEvent(resource, action)
                for name, registered in self._registered.items():
                    answer = _answer(registered, event)
                    table[name] = _either(table[name], answer) if name in table else answer
            self._tables[key] = table
        return table

    def wakes(self, resource: str, action: str | frozenset[str], obj: Any, *, unrefused: bool = True) -> Wakes | None:
        """Whether `action` (or any of several, a node update's parts) on the object `obj` of
        `resource` may help a waiting pod: one refused by a plugin that says yes. A pod no
        plugin refused (no node at all) moves when `unrefused`. None when every plugin says yes
        whatever the pod (a node added, for the built-ins): the queue then moves every waiting
        pod without asking, as for an event without hints."""
        key = (resource, frozenset((action,)) if isinstance(action, str) else action)
        split = self._split.get(key)
        if split is None:
            split = self._split[key] = _Split.of(self.table(*key))
        if unrefused and split.all_yes:
            return None
        plans = split.plans

        def wakes(pod: PodView, rejected_by: frozenset[str]) -> bool:
            # This runs for every waiting pod on every event: what the refusing plugins say is
            # worked out once per distinct set of them, and only their hints run per pod.
            if not rejected_by:
                return unrefused
            plan = plans.get(rejected_by)
            if plan is None:
                plan = plans[rejected_by] = split.plan(rejected_by)
            if plan is True or plan is False:
                return plan
            for hint in plan:
                if hint(pod, obj):
                    return True
            return False

        return wakes


class _Split:
    """One event's table as sets: the plugins that say yes, those that say no, those to ask."""

    __slots__ = ("all_yes", "ask", "no", "plans", "yes")

    def __init__(self, yes: frozenset[str], no: frozenset[str], ask: dict[str, tuple[Hint, ...]]) -> None:
        self.yes, self.no, self.ask = yes, no, ask
        self.all_yes = not no and not ask
        # rejected_by -> plan(rejected_by), filled by the queue's wakes (a few distinct sets)
        self.plans: dict[frozenset[str], bool | tuple[Hint, ...]] = {}

    def plan(self, rejected_by: frozenset[str]) -> bool | tuple[Hint, ...]:
        """For a pod these plugins refused: True (one says yes, or a name no policy knows any
        more: reloaded since), False (all say no), else the hints to ask of the pod."""
        if not self.yes.isdisjoint(rejected_by):
            return True
        if rejected_by <= self.no:
            return False
        hints: list[Hint] = []
        for plugin in sorted(rejected_by - self.no):
            found = self.ask.get(plugin)
            if found is None:
                return True
            hints.extend(found)
        return tuple(hints)

    @classmethod
    def of(cls, table: Mapping[str, Answer]) -> _Split:
        return cls(frozenset(name for name, answer in table.items() if answer is True),
                   frozenset(name for name, answer in table.items() if answer is False),
                   {name: answer for name, answer in table.items() if isinstance(answer, tuple)})


__all__ = ["Answer", "QueueingHints"]
