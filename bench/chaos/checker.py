"""The chaos run's verdict: the invariants a scheduler promises, checked over a whole history.

The checker reads what the run recorded (:class:`Run`): its own watch of every pod from
the start (each event stamped on arrival), the cluster as it is at the end (nodes, pods,
claims, volumes, Events), the faults with their times, the pods the workload deleted
itself, and the processes that did not come back. It judges no process's word: only
what the API server holds and held.

Each check is a function ``Run -> list[Violation]`` in :data:`CHECKS`, so a new invariant
is one more entry (gangs: :func:`partly_bound_gangs` reads pods that name a pod group,
either API, against the groups' minCount read at the end). The checks
that need the history replay it event by event (:func:`replay`) and judge each bind
against the pods bound at that moment, so a transient overcommit that a later deletion
hides is still found.

Where a scheduler may legitimately have seen a slightly older cluster than the replay
(a pod deleted between its decision and its bind), the check gives it the benefit of the
doubt: spread counts pods deleted within ``Run.spread_slack`` seconds before the bind
as still there.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from bench.chaos.dra_checks import DRA_CHECKS
from bench.chaos.records import (  # noqa: F401 - the run's types, read here and by the checks' users
    COSCHEDULING_LABEL,
    HOSTNAME,
    IGNORED_PREFIXES,
    PREEMPTED_BY,
    Check,
    FaultRecord,
    Moment,
    Pod,
    PodEvent,
    Run,
    Violation,
    key,
    labels_of,
    node_of,
    replay,
    terminal,
    uid,
)
from extender.errors import InvalidObject, QuantityError
from extender.model.devices import assigned_shares, node_inventory
from extender.model.resources import parse_resource_list, pod_requests
from extender.model.selectors import parse_label_selector, parse_node_selector_term

_T = TypeVar("_T")


def moved_pods(run: Run) -> list[Violation]:
    """A pod (one uid) whose nodeName changed once set: bound twice, to two nodes."""
    first: dict[str, str] = {}
    found = []
    for event in run.events:
        node = node_of(event.pod)
        if not node:
            continue
        was = first.setdefault(uid(event.pod), node)
        if was != node:
            found.append(Violation("moved", key(event.pod), f"bound to {was}, then to {node}", event.at))
            first[uid(event.pod)] = node
    return found


def bound_twice(run: Run) -> list[Violation]:
    """More than one Scheduled Event for one pod: two schedulers (or two leaders) each
    believed they bound it. Aggregated Events count their repeats."""
    counts: Counter[tuple[str, str]] = Counter()
    messages: dict[tuple[str, str], list[str]] = defaultdict(list)
    for event in run.kube_events:
        if event.get("reason") != "Scheduled":
            continue
        involved = event.get("involvedObject") or {}
        pod = (f"{involved.get('namespace', '')}/{involved.get('name', '')}", str(involved.get("uid") or ""))
        counts[pod] += max(1, int(event.get("count") or 1))
        messages[pod].append(str(event.get("message") or ""))
    return [Violation("bound-twice", pod, f"{count} Scheduled events: {'; '.join(messages[(pod, pod_uid)])}")
            for (pod, pod_uid), count in counts.items() if count > 1]


def _allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    return parse_resource_list((node.get("status") or {}).get("allocatable"), "status.allocatable")


def _requests(pod: Pod) -> dict[str, int]:
    try:
        requests = pod_requests(pod.get("spec") or {})
    except (InvalidObject, QuantityError):
        return {}
    return {name: amount for name, amount in requests.items() if not name.startswith(IGNORED_PREFIXES)}


def _bindings(run: Run, nodes: Mapping[str, _T | None]) -> Iterator[tuple[Moment, Pod, str, _T]]:
    """Each moment of the run a pod is bound to one of ``nodes`` (by name, to what a check
    knows of the node; a node it knows nothing of, or None of, is passed over):
    (moment, the pod, its node, what is known of the node)."""
    for moment in replay(run.events):
        pod = moment.newly_bound
        if pod is None:
            continue
        node = node_of(pod)
        known = nodes.get(node)
        if known is not None:
            yield moment, pod, node, known


def over_allocatable(run: Run) -> list[Violation]:
    """A node whose bound pods requested more than its allocatable at some moment (cpu,
    memory, pods, extended resources; a resource the node does not advertise has 0)."""
    allocatable = {n["metadata"]["name"]: _allocatable(n) for n in run.nodes}
    reported: set[tuple[str, str]] = set()
    found = []
    for moment, pod, node, advertised in _bindings(run, allocatable):
        used: Counter[str] = Counter()
        names = []
        for other in moment.bound.values():
            if node_of(other) == node:
                used.update({r: n for r, n in _requests(other).items() if r not in run.dra_extended})
                used["pods"] += 1
                names.append(key(other))
        for resource, amount in used.items():
            limit = advertised.get(resource, 0)
            if amount > limit and (node, resource) not in reported:
                reported.add((node, resource))
                found.append(Violation("over-allocatable", node,
                                       f"{resource}: {amount} requested > {limit} allocatable after binding "
                                       f"{key(pod)} ({len(names)} pods: {', '.join(sorted(names))})",
                                       moment.event.at))
    return found


def gpu_over_shares(run: Run) -> list[Violation]:
    """A device whose bound pods' assignments add up to more memory or compute than it has."""
    inventories = {n["metadata"]["name"]: node_inventory((n.get("metadata") or {}).get("annotations"))
                   for n in run.nodes}
    reported: set[tuple[str, str]] = set()
    found = []
    for moment, pod, node, inventory in _bindings(run, inventories):
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for other in moment.bound.values():
            if node_of(other) != node:
                continue
            try:
                shares = assigned_shares((other.get("metadata") or {}).get("annotations"), node) or ()
            except InvalidObject:
                shares = ()
            for device, memory, cores in shares:
                totals[device][0] += memory
                totals[device][1] += cores
        for device, (memory, cores) in totals.items():
            capacity = inventory.capacity(device)
            if (memory > capacity[0] or cores > capacity[1]) and (node, device) not in reported:
                reported.add((node, device))
                found.append(Violation("gpu-over-shares", f"{node}/{device}",
                                       f"{memory} MiB, {cores}% assigned > {capacity[0]} MiB, {capacity[1]}% "
                                       f"after binding {key(pod)}", moment.event.at))
    return found


def _anti_affinity_terms(pod: Pod) -> list[Mapping[str, Any]]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _term_matches(term: Mapping[str, Any], owner: Pod, other: Pod) -> bool:
    """Does `owner`'s affinity term select `other` (namespaces: the term's, else the owner's)?"""
    namespaces = term.get("namespaces") or [(owner.get("metadata") or {}).get("namespace")]
    if (other.get("metadata") or {}).get("namespace") not in namespaces:
        return False
    selector = parse_label_selector(term.get("labelSelector"), "labelSelector", nil_matches_nothing=True)
    return selector.matches(labels_of(other))


def broken_anti_affinity(run: Run) -> list[Violation]:
    """A pod bound into the topology domain of a pod it (or that pod) must keep away from."""
    node_labels = {n["metadata"]["name"]: labels_of(n) for n in run.nodes}
    found = []
    for moment in replay(run.events):
        pod = moment.newly_bound
        if pod is None:
            continue
        mine = node_labels.get(node_of(pod), {})
        for other in moment.bound.values():
            if uid(other) == uid(pod):
                continue
            theirs = node_labels.get(node_of(other), {})
            pairs = [(t, pod, other) for t in _anti_affinity_terms(pod)]
            pairs += [(t, other, pod) for t in _anti_affinity_terms(other)]
            for term, owner, target in pairs:
                topology = term.get("topologyKey") or HOSTNAME
                if (topology in mine and mine.get(topology) == theirs.get(topology)
                        and _term_matches(term, owner, target)):
                    found.append(Violation("anti-affinity", key(pod),
                                           f"bound to {node_of(pod)} with {key(other)} on {node_of(other)} "
                                           f"({topology}={mine[topology]}); {key(owner)}'s term selects "
                                           f"{key(target)}", moment.event.at))
                    break
    return found


def _node_selector_allows(pod: Pod, labels: Mapping[str, str]) -> bool:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _domain_counts(pods: Iterable[Pod], pod: Pod, eligible: Mapping[str, str], selector: Any) -> Counter[str]:
    """Per domain, the pods other than `pod` of its namespace that `selector` matches."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    return Counter(eligible[node_of(p)] for p in pods
                   if node_of(p) in eligible and uid(p) != uid(pod)
                   and (p.get("metadata") or {}).get("namespace") == namespace
                   and selector.matches(labels_of(p)))


def broken_spread(run: Run) -> list[Violation]:
    """A bind that broke a DoNotSchedule topology spread constraint: counted as kube-scheduler
    does (matching pods of the pod's namespace per domain, over the nodes its nodeSelector
    allows). Where it lowers the skew, a pod deleted up to `spread_slack` seconds before the
    bind still counts (the scheduler may have decided before the deletion), and so does one
    bound up to `spread_slack` seconds after it (a scheduler binds asynchronously: pods it
    placed together, each counting the others as assumed, may reach the API server in any
    order)."""
    node_labels = {n["metadata"]["name"]: labels_of(n) for n in run.nodes}
    first_binds: dict[str, tuple[float, Pod]] = {}
    for event in run.events:
        if node_of(event.pod) and event.type != "DELETED":
            first_binds.setdefault(uid(event.pod), (event.at, event.pod))
    found = []
    for moment in replay(run.events):
        pod = moment.newly_bound
        if pod is None:
            continue
        constraints = (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        now_at = moment.event.at
        recent = [p for at, p in moment.deleted if now_at - at <= run.spread_slack]
        recent += [p for at, p in first_binds.values()
                   if now_at <= at <= now_at + run.spread_slack and uid(p) not in moment.bound]
        for constraint in constraints:
            if constraint.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            topology = constraint["topologyKey"]
            selector = parse_label_selector(constraint.get("labelSelector"), "labelSelector",
                                            nil_matches_nothing=True)
            eligible = {name: labels[topology] for name, labels in node_labels.items()
                        if topology in labels and _node_selector_allows(pod, labels)}
            domain = eligible.get(node_of(pod))
            if domain is None:
                continue

            now = _domain_counts(moment.bound.values(), pod, eligible, selector)
            generous = now + _domain_counts(recent, pod, eligible, selector)
            least = min(generous.get(d, 0) for d in set(eligible.values()))
            skew = now.get(domain, 0) + 1 - least
            if skew > int(constraint.get("maxSkew", 1)):
                spread = ", ".join(f"{d}={now.get(d, 0)}" for d in sorted(set(eligible.values())))
                found.append(Violation("spread", key(pod),
                                       f"bound to {node_of(pod)} ({topology}={domain}): skew {skew} > maxSkew "
                                       f"{constraint.get('maxSkew', 1)} (other matching pods: {spread})",
                                       moment.event.at))
    return found


# ---- checks over the final cluster ----------------------------------------------------------------


def _volume_allows(volume: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if not required:
        return True
    terms = [parse_node_selector_term(t, "nodeSelectorTerms") for t in required.get("nodeSelectorTerms") or []]
    return any(t.matches(labels_of(node), node["metadata"]["name"]) for t in terms)


def claims_elsewhere(run: Run) -> list[Violation]:
    """A bound pod whose claim is unbound, or bound to a volume its node cannot reach."""
    nodes = {n["metadata"]["name"]: n for n in run.nodes}
    claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in run.claims}
    volumes = {v["metadata"]["name"]: v for v in run.volumes}
    found = []
    for pod in run.pods:
        node = node_of(pod)
        if not node or node not in nodes:
            continue
        namespace = pod["metadata"]["namespace"]
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not name:
                continue
            claim = claims.get(f"{namespace}/{name}")
            volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
            if claim is None or not volume_name or volume_name not in volumes:
                found.append(Violation("claim-unbound", key(pod),
                                       f"bound to {node} while claim {name} is not bound to a volume"))
            elif not _volume_allows(volumes[volume_name], nodes[node]):
                found.append(Violation("claim-elsewhere", key(pod),
                                       f"bound to {node}; claim {name} is bound to {volume_name}, "
                                       "which that node cannot reach"))
    return found


def group_of(pod: Pod) -> str:
    """``namespace/name`` of the pod group `pod` is a member of, or "": kube-scheduler v1.36's
    ``spec.schedulingGroup.podGroupName`` first, else Coscheduling's label (docs/gangs.md)."""
    name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") \
        or labels_of(pod).get(COSCHEDULING_LABEL)
    return f"{(pod.get('metadata') or {}).get('namespace', '')}/{name}" if name else ""


def _quiet_time(run: Run, start: float, end: float) -> float:
    """Seconds of [start, end] outside every fault's window, from its start to its recovery
    (to the end of the run, for a fault never recovered): time in which nothing was broken."""
    windows = sorted((f.started, f.recovered if f.recovered is not None else run.final_at) for f in run.faults)
    quiet, at = 0.0, start
    for begin, finish in windows:
        if finish <= at or begin >= end:
            continue
        quiet += max(0.0, begin - at)
        at = max(at, finish)
    return quiet + max(0.0, end - at)


def partly_bound_gangs(run: Run) -> list[Violation]:
    """A pod group with some members bound but fewer than its minCount (``Run.pod_groups``;
    all its members when unknown), once things had time to settle. Extra members beyond
    minCount may stay Pending: only the count of bound members against minCount matters.

    * At the end (read after the quiet grace): any such group.
    * During the run (the replay): a spell of being partly bound with more than
      ``Run.gang_settle`` seconds in it outside every fault's window (from its start to its
      recovery). Binds of one gang reach the API server one by one, and a fault can cut
      between them; faults follow each other closely, so only the quiet time counts. A gang
      the workload has begun deleting is judged up to then."""
    members: dict[str, list[Pod]] = defaultdict(list)
    for pod in run.pods:
        if group_of(pod) and not terminal(pod):
            members[group_of(pod)].append(pod)
    found = []
    for group, pods in members.items():
        bound = sum(1 for p in pods if node_of(p))
        needed = run.pod_groups.get(group, len(pods))
        if 0 < bound < needed:
            found.append(Violation("gang-partly-bound", group,
                                   f"at the end, {bound} of {needed} required members bound ({len(pods)} members)"))
    all_members: dict[str, set[str]] = defaultdict(set)
    for event in run.events:
        if group_of(event.pod):
            all_members[group_of(event.pod)].add(uid(event.pod))
    torn_down: set[str] = set()
    since: dict[str, float] = {}

    def spell_over(group: str, end: float) -> None:
        start = since.pop(group)
        quiet = _quiet_time(run, start, end)
        if quiet > run.gang_settle:
            needed = run.pod_groups.get(group, len(all_members[group]))
            found.append(Violation("gang-partly-bound", group,
                                   f"fewer than {needed} members bound from {start:.1f} s to {end:.1f} s "
                                   f"({quiet:.1f} s of it with no fault under way)", start))

    for moment in replay(run.events):
        group = group_of(moment.event.pod)
        if not group or group in torn_down:
            continue
        if moment.event.type == "DELETED" and uid(moment.event.pod) in run.workload_deleted:
            torn_down.add(group)  # the spell so far still counts
            if group in since:
                spell_over(group, moment.event.at)
            continue
        bound = sum(1 for u in all_members[group] if u in moment.bound)
        if 0 < bound < run.pod_groups.get(group, len(all_members[group])):
            since.setdefault(group, moment.event.at)
        elif group in since:
            spell_over(group, moment.event.at)
    return found


def pending_but_fits(run: Run) -> list[Violation]:
    """A pod still Pending `pending_grace` seconds after the last fault and after its creation,
    although it fits a node now (judged by `Run.fits`). A member of a pod group short of its
    minCount is judged with its group: a violation when the oracle places the members the
    quorum still needs together (``Run.fits_together``); one alone may fit where the gang does
    not. Once the quorum is bound, an extra member is judged alone."""
    if run.fits is None:
        return []
    last_fault = max((f.ended for f in run.faults), default=0.0)
    first_seen: dict[str, float] = {}
    for event in run.events:
        first_seen.setdefault(uid(event.pod), event.at)

    def settled(pods: Sequence[Pod]) -> float:
        since = max([first_seen.get(uid(p), run.final_at) for p in pods] + [last_fault])
        return run.final_at - since

    groups: dict[str, list[Pod]] = defaultdict(list)
    for pod in run.pods:
        if group_of(pod) and not terminal(pod):
            groups[group_of(pod)].append(pod)
    found = []
    for pod in run.pods:
        if node_of(pod) or terminal(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        group = group_of(pod)
        if group and sum(1 for p in groups[group] if node_of(p)) < run.pod_groups.get(group, len(groups[group])):
            continue  # judged with its group below
        if settled([pod]) < run.pending_grace:
            continue
        node = run.fits(pod)
        if node:
            found.append(Violation("pending-but-fits", key(pod),
                                   f"Pending {settled([pod]):.0f} s after the last fault and its creation, "
                                   f"yet it fits {node}"))
    for group, pods in groups.items():
        needed = run.pod_groups.get(group, len(pods)) - sum(1 for p in pods if node_of(p))
        pending = [p for p in pods if not node_of(p) and not (p.get("metadata") or {}).get("deletionTimestamp")]
        if needed <= 0 or len(pending) < needed or run.fits_together is None or settled(pods) < run.pending_grace:
            continue
        placed = run.fits_together(pending)
        if placed >= needed:
            found.append(Violation("pending-but-fits", group,
                                   f"{len(pending)} members Pending {settled(pods):.0f} s after the last fault and "
                                   f"their creation, yet {placed} fit together ({needed} needed)"))
    return found


def orphaned_victims(run: Run) -> list[Violation]:
    """A pod evicted for a preemptor that never bound (unless the workload deleted the preemptor)."""
    ever_bound = {uid(e.pod) for e in run.events if node_of(e.pod)}
    known = {uid(e.pod): e.pod for e in run.events}
    found = []
    for event in run.kube_events:
        if event.get("reason") != "Preempted":
            continue
        match = PREEMPTED_BY.search(str(event.get("message") or ""))
        if match is None:
            continue
        preemptor, node = match.groups()
        involved = event.get("involvedObject") or {}
        victim = f"{involved.get('namespace', '')}/{involved.get('name', '')}"
        if preemptor in ever_bound or preemptor in run.workload_deleted:
            continue
        name = key(known[preemptor]) if preemptor in known else f"uid {preemptor}"
        found.append(Violation("victim-for-nothing", victim,
                               f"evicted on {node} for {name}, which never bound"))
    return found


def processes_not_back(run: Run) -> list[Violation]:
    return [Violation("process-not-back", entry.split(":", 1)[0], entry) for entry in run.processes_down]


def faults_not_recovered(run: Run) -> list[Violation]:
    return [Violation("no-recovery", f.kind, f"injected at {f.started:.1f} s, over at {f.ended:.1f} s, "
                                             f"never recovered ({f.detail})", f.started)
            for f in run.faults if f.recovered is None]


CHECKS: dict[str, Check] = {
    "moved": moved_pods,
    "bound-twice": bound_twice,
    "over-allocatable": over_allocatable,
    "gpu-over-shares": gpu_over_shares,
    "anti-affinity": broken_anti_affinity,
    "spread": broken_spread,
    "claims": claims_elsewhere,
    "gangs": partly_bound_gangs,
    "pending-but-fits": pending_but_fits,
    "victims": orphaned_victims,
    "processes": processes_not_back,
    "recovery": faults_not_recovered,
}


CHECKS.update(DRA_CHECKS)


def check(run: Run, checks: Mapping[str, Check] = CHECKS) -> list[Violation]:
    """Every violation every check finds, in check order."""
    return [violation for each in checks.values() for violation in each(run)]
