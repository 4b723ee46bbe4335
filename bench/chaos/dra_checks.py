"""The chaos checker's invariants of dynamic resource allocation (resource.k8s.io/v1).

They read what the API server held, never a scheduler's word: the checker's own watch of
every ResourceClaim (``Run.claim_events``, each event stamped on arrival, in the order etcd
wrote them, since one watch of one resource is ordered), the pod watch, and the claims,
slices and pods at the end.

* **device-twice**: at no moment is one device in two allocated claims (or twice in one),
  except admin access (``adminAccess`` results hold nothing, docs/dra.md) and shares of a
  device that allows multiple allocations (each result with its ``shareID``), which are
  judged by capacity instead;
* **device-over-capacity**: the shares of one device never add up past its capacity;
* **counters-over**: the devices allocated from a pool never consume more of a counter set
  (``sharedCounters``) than it has;
* **dra-pod-claims**: a pod bound to a node has each of its claims (by name, from a template
  through ``status.resourceClaimStatuses``, or its extended-resource claim) allocated on that
  node and reserved for it: by the time of its bind (``Run.spread_slack`` later at most, the
  two watches being separate streams) and, for a pod still bound at the end, at the end;
* after settling (the end, read ``--grace`` quiet seconds after the last fault): no claim
  **reserved for a pod that is gone**, no **leaked** claim (allocated, with no live pod using
  it and no live owner), no **finalizer left** on a claim being deleted.

"A pod Pending at the end while its claims could be allocated" is the general
``pending-but-fits`` check, with the DRA objects given to the oracle (bench/chaos/oracle.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from bench.chaos.records import Run, Violation, key, node_of, replay, terminal, uid
from extender.errors import InvalidObject, QuantityError
from extender.model.quantities import parse_quantity
from extender.model.selectors import parse_node_selector_term

Obj = Mapping[str, Any]
DeviceKey = tuple[str, str, str]  # driver, pool, device
FINALIZER = "resource.kubernetes.io/delete-protection"


@dataclass(frozen=True)
class ClaimEvent:
    """One event of the checker's ResourceClaim watch (or of a re-list after a gap)."""

    at: float
    type: str  # ADDED, MODIFIED, DELETED
    claim: Obj


def claim_key(claim: Obj) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def claim_uid(claim: Obj) -> str:
    return str((claim.get("metadata") or {}).get("uid") or claim_key(claim))


def results(claim: Obj) -> list[Obj]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def allocated(claim: Obj) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))


def reserved_uids(claim: Obj) -> set[str]:
    return {str(r.get("uid")) for r in (claim.get("status") or {}).get("reservedFor") or []
            if r.get("resource") == "pods"}


def device_of(result: Obj) -> DeviceKey:
    return str(result.get("driver")), str(result.get("pool")), str(result.get("device"))


def _quantity(raw: Any) -> Fraction | None:
    try:
        return parse_quantity(raw)
    except QuantityError:
        return None


# ---- the devices published ----------------------------------------------------------------------


@dataclass(frozen=True)
class Inventory:
    """What the slices publish, newest generation of each pool: each device's capacity and
    whether it takes several allocations, what it consumes of its pool's counter sets, and
    each counter set's counters."""

    capacity: Mapping[DeviceKey, Mapping[str, Fraction]]
    shareable: frozenset[DeviceKey]
    consumes: Mapping[DeviceKey, Mapping[tuple[str, str], Fraction]]  # (set, counter) -> amount
    counters: Mapping[tuple[str, str], Mapping[tuple[str, str], Fraction]]  # (driver, pool) -> (set, counter) -> value

    @classmethod
    def from_slices(cls, slices: Iterable[Obj]) -> Inventory:
        newest: dict[tuple[str, str], int] = {}
        listed = list(slices)
        for item in listed:
            spec = item.get("spec") or {}
            pool = (str(spec.get("driver")), str((spec.get("pool") or {}).get("name")))
            newest[pool] = max(newest.get(pool, 0), int((spec.get("pool") or {}).get("generation") or 0))
        capacity: dict[DeviceKey, dict[str, Fraction]] = {}
        shareable: set[DeviceKey] = set()
        consumes: dict[DeviceKey, dict[tuple[str, str], Fraction]] = {}
        counters: dict[tuple[str, str], dict[tuple[str, str], Fraction]] = defaultdict(dict)
        for item in listed:
            spec = item.get("spec") or {}
            driver, pool = str(spec.get("driver")), str((spec.get("pool") or {}).get("name"))
            if int((spec.get("pool") or {}).get("generation") or 0) != newest[(driver, pool)]:
                continue
            for counter_set in spec.get("sharedCounters") or []:
                for name, value in (counter_set.get("counters") or {}).items():
                    amount = _quantity((value or {}).get("value"))
                    if amount is not None:
                        counters[(driver, pool)][(str(counter_set.get("name")), name)] = amount
            for device in spec.get("devices") or []:
                key = (driver, pool, str(device.get("name")))
                capacity[key] = {name: amount for name, value in (device.get("capacity") or {}).items()
                                 if (amount := _quantity((value or {}).get("value"))) is not None}
                if device.get("allowMultipleAllocations"):
                    shareable.add(key)
                used: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
                for consumption in device.get("consumesCounters") or []:
                    for name, value in (consumption.get("counters") or {}).items():
                        amount = _quantity((value or {}).get("value"))
                        if amount is not None:
                            used[(str(consumption.get("counterSet")), name)] += amount
                consumes[key] = dict(used)
        return cls(capacity, frozenset(shareable), consumes, dict(counters))


# ---- the claim replay -----------------------------------------------------------------------------


def replay_claims(events: Sequence[ClaimEvent]) -> Iterator[tuple[ClaimEvent, dict[str, Obj], bool]]:
    """After each event: the allocated claims (uid -> claim), and whether this event allocated
    its claim or changed its allocation (what to judge then)."""
    held: dict[str, Obj] = {}
    for event in events:
        claim_id = claim_uid(event.claim)
        before = held.get(claim_id)
        if event.type == "DELETED" or not allocated(event.claim):
            held.pop(claim_id, None)
            yield event, held, False
            continue
        held[claim_id] = event.claim
        changed = before is None or results(before) != results(event.claim)
        yield event, held, changed


def _holders(held: Mapping[str, Obj]) -> dict[DeviceKey, list[tuple[str, Obj]]]:
    """Device -> (claim, result) of every allocated result that holds it (admin access holds nothing)."""
    found: dict[DeviceKey, list[tuple[str, Obj]]] = defaultdict(list)
    for claim in held.values():
        for result in results(claim):
            if not result.get("adminAccess"):
                found[device_of(result)].append((claim_key(claim), result))
    return found


def device_twice(run: Run) -> list[Violation]:
    """One device in two allocated claims at one moment (or twice in one claim), shares of a
    device that takes several allocations and admin access apart."""

    inventory = Inventory.from_slices(run.resource_slices)
    reported: set[DeviceKey] = set()
    found = []
    for event, held, changed in replay_claims(run.claim_events):
        if not changed:
            continue
        holders = _holders(held)
        for result in results(event.claim):
            device = device_of(result)
            if result.get("adminAccess") or device in reported:
                continue
            owners = holders.get(device, [])
            whole = [(c, r) for c, r in owners if not r.get("shareID")]
            if len(owners) > 1 and (whole or device not in inventory.shareable):
                reported.add(device)
                names = ", ".join(sorted(f"{c} ({r.get('request')}{' share ' + str(r.get('shareID')) if r.get('shareID') else ''})"
                                         for c, r in owners))
                found.append(Violation("device-twice", "/".join(device),
                                       f"allocated {len(owners)} times at once: {names}", event.at))
    return found


def device_over_capacity(run: Run) -> list[Violation]:
    """The shares of one device (consumed capacity of each result with a shareID) adding up
    past the device's capacity at some moment."""

    inventory = Inventory.from_slices(run.resource_slices)
    reported: set[tuple[DeviceKey, str]] = set()
    found = []
    for event, held, changed in replay_claims(run.claim_events):
        if not changed:
            continue
        holders = _holders(held)
        for device in {device_of(r) for r in results(event.claim) if r.get("shareID")}:
            used: dict[str, Fraction] = defaultdict(Fraction)
            for _, result in holders.get(device, []):
                for name, value in (result.get("consumedCapacity") or {}).items():
                    used[name] += _quantity(value) or Fraction(0)
            for name, amount in used.items():
                limit = inventory.capacity.get(device, {}).get(name)
                if limit is not None and amount > limit and (device, name) not in reported:
                    reported.add((device, name))
                    found.append(Violation("device-over-capacity", "/".join(device),
                                           f"{name}: {float(amount):g} consumed by {len(holders[device])} shares "
                                           f"> capacity {float(limit):g}", event.at))
    return found


def counters_over(run: Run) -> list[Violation]:
    """A pool's counter set consumed past its counters by the devices allocated at some moment
    (a device counts once, however many shares of it are allocated)."""

    inventory = Inventory.from_slices(run.resource_slices)
    reported: set[tuple[str, str, str, str]] = set()
    found = []
    for event, held, changed in replay_claims(run.claim_events):
        if not changed:
            continue
        pools = {device_of(r)[:2] for r in results(event.claim)}
        in_use = set(_holders(held))
        for pool in pools:
            limits = inventory.counters.get(pool, {})
            used: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
            devices = sorted(d for d in in_use if d[:2] == pool)
            for device in devices:
                for counter, amount in inventory.consumes.get(device, {}).items():
                    used[counter] += amount
            for (counter_set, counter), amount in used.items():
                limit = limits.get((counter_set, counter), Fraction(0))
                if amount > limit and (*pool, counter_set, counter) not in reported:
                    reported.add((*pool, counter_set, counter))
                    found.append(Violation("counters-over", f"{pool[0]}/{pool[1]}/{counter_set}",
                                           f"{counter}: {float(amount):g} consumed > {float(limit):g} "
                                           f"(devices {', '.join(d[2] for d in devices)})", event.at))
    return found


def tainted_devices_allocated(run: Run) -> list[Violation]:
    """A device newly allocated while it had a NoSchedule taint its request did not tolerate
    (``Run.device_taints``, the injector's windows; allocations written up to ``spread_slack``
    seconds after the taint are excused: the scheduler may not have seen it yet). An allocation
    made before the taint stays, as in kube-scheduler (docs/dra.md)."""

    found = []
    previous: dict[str, list[Obj]] = {}
    for event in run.claim_events:
        before = previous.get(claim_uid(event.claim), [])
        now = results(event.claim) if event.type != "DELETED" else []
        previous[claim_uid(event.claim)] = now
        for result in now:
            if result in before or result.get("tolerations"):
                continue
            for device, start, end in run.device_taints:
                if device_of(result) == tuple(device) and start + run.spread_slack < event.at < end:
                    found.append(Violation("tainted-device-allocated", claim_key(event.claim),
                                           f"given {'/'.join(device)} at {event.at:.1f} s, tainted NoSchedule "
                                           f"from {start:.1f} s to {end:.1f} s", event.at))
    return found


# ---- pods and their claims ------------------------------------------------------------------------


def pod_claim_names(pod: Obj) -> list[str]:
    """The names of the ResourceClaims a pod uses: named in its spec, made from a template
    (``status.resourceClaimStatuses``; "" while not made yet), and its extended-resource claim."""
    status = pod.get("status") or {}
    generated = {s.get("name"): s.get("resourceClaimName") or "" for s in status.get("resourceClaimStatuses") or []}
    names = [str(e.get("resourceClaimName") or generated.get(e.get("name")) or "")
             for e in (pod.get("spec") or {}).get("resourceClaims") or []]
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    return names + ([str(extended)] if extended else [])


def uses_claims(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims")) or bool(
        ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName"))


def allocated_on(claim: Obj, node: Obj) -> bool:
    """Does the claim's allocation reach `node` (its nodeSelector; none: every node)?"""
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    if not selector:
        return True
    try:
        terms = [parse_node_selector_term(t, "nodeSelectorTerms") for t in selector.get("nodeSelectorTerms") or []]
    except InvalidObject:
        return False
    meta = node.get("metadata") or {}
    return any(t.matches(dict(meta.get("labels") or {}), str(meta.get("name"))) for t in terms)


def _problem(claim: Obj | None, name: str, pod_uid: str, node: Obj) -> str:
    """Why `claim` does not serve a pod on `node` ("" when it does)."""
    if claim is None:
        return f"claim {name} does not exist"
    if not allocated(claim):
        return f"claim {name} is not allocated"
    if not allocated_on(claim, node):
        return f"claim {name} is allocated elsewhere ({(claim['status']['allocation'].get('nodeSelector'))})"
    if pod_uid not in reserved_uids(claim):
        return f"claim {name} is not reserved for it (reserved for {sorted(reserved_uids(claim)) or 'nobody'})"
    return ""


def pods_without_claims(run: Run) -> list[Violation]:
    """A bound pod whose claims were not allocated on its node and reserved for it by its bind
    (``spread_slack`` seconds later at most), or are not at the end while it is still bound."""

    nodes = {n["metadata"]["name"]: n for n in run.nodes}
    versions: dict[str, list[tuple[float, Obj | None]]] = defaultdict(list)  # ns/name -> (at, claim or None)
    for event in run.claim_events:
        versions[claim_key(event.claim)].append((event.at, None if event.type == "DELETED" else event.claim))
    latest_status: dict[str, Obj] = {}  # pod uid -> its newest pod (claim names come in status updates)
    for event in run.events:
        latest_status[uid(event.pod)] = event.pod
    found = []
    for moment in replay(run.events):
        pod = moment.newly_bound
        if pod is None or not uses_claims(latest_status.get(uid(pod), pod)):
            continue
        node = nodes.get(node_of(pod))
        if node is None:
            continue
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        deadline = moment.event.at + run.spread_slack
        for name in pod_claim_names(latest_status.get(uid(pod), pod)) or [""]:
            seen = [c for at, c in versions.get(f"{namespace}/{name}", []) if at <= deadline]
            if any(c is not None and not _problem(c, name, uid(pod), node) for c in seen):
                continue
            last = seen[-1] if seen else None
            why = _problem(last, name or "(not made from its template)", uid(pod), node)
            found.append(Violation("dra-pod-claims", key(pod), f"bound to {node_of(pod)} while {why}",
                                   moment.event.at))
    claims = {claim_key(c): c for c in run.resource_claims}
    for pod in run.pods:
        node = nodes.get(node_of(pod))
        if node is None or terminal(pod) or (pod.get("metadata") or {}).get("deletionTimestamp") \
                or not uses_claims(pod):
            continue
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        for name in pod_claim_names(pod):
            why = _problem(claims.get(f"{namespace}/{name}"), name or "(not made)", uid(pod), node)
            if why:
                found.append(Violation("dra-pod-claims", key(pod), f"at the end, bound to {node_of(pod)} while {why}"))
    return found


def settled_claims(run: Run) -> list[Violation]:
    """At the end (read after the quiet grace): a claim reserved for a pod that is gone (or
    done), an allocated claim no live pod uses and no live pod owns (a leak: its devices are
    lost), a claim being deleted that still has its finalizer."""

    live = {uid(p): p for p in run.pods if not terminal(p)}
    used: set[str] = set()
    for pod in live.values():
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        used.update(f"{namespace}/{name}" for name in pod_claim_names(pod) if name)
    found = []
    for claim in run.resource_claims:
        name = claim_key(claim)
        gone = sorted(r.get("name", "?") for r in (claim.get("status") or {}).get("reservedFor") or []
                      if r.get("resource") == "pods" and str(r.get("uid")) not in live)
        if gone:
            found.append(Violation("claim-reserved-for-gone", name, f"reserved for pods that are gone: {', '.join(gone)}"))
        owners = [o for o in (claim.get("metadata") or {}).get("ownerReferences") or []
                  if o.get("kind") == "Pod" and str(o.get("uid")) in live]
        meta = claim.get("metadata") or {}
        if allocated(claim) and name not in used and not owners and not reserved_uids(claim):  # else: just above
            devices = ", ".join("/".join(device_of(r)) for r in results(claim))
            found.append(Violation("claim-leaked", name,
                                   f"allocated ({devices}) with no live pod using or owning it"
                                   + (" while being deleted" if meta.get("deletionTimestamp") else "")))
        if meta.get("deletionTimestamp") and FINALIZER in (meta.get("finalizers") or []):
            found.append(Violation("claim-finalizer-left", name,
                                   f"deleted at {meta['deletionTimestamp']} but still has {FINALIZER} "
                                   f"(allocated: {allocated(claim)}, reserved for {len(reserved_uids(claim))})"))
    return found


DRA_CHECKS = {
    "device-twice": device_twice,
    "device-over-capacity": device_over_capacity,
    "counters-over": counters_over,
    "tainted-device-allocated": tainted_devices_allocated,
    "dra-pod-claims": pods_without_claims,
    "settled-claims": settled_claims,
}
