"""Dynamic Resource Allocation side by side: kube-scheduler v1.36.3 alone, then `extender schedule`.

As tests/e2e/test_side_by_side.py does (sidebyside.run): each scenario's nodes, DeviceClasses
and ResourceSlices are created once; kube-scheduler (default profile, DRA on by default) and
then our standalone scheduler each place their own copy of the pods, in a namespace of
their own where that run's ResourceClaims and ResourceClaimTemplates are created first and
removed after. Each must reach what the scenario states: how many pods are bound (pods that
differ only by name are interchangeable: which of them gets a device depends on when its
claim was created, not on the scheduler), on which nodes, every bound pod's claims
allocated from devices of its node and reserved for it, no device in two claims
(dra.Settled.problems), and the scenario's own checks on the allocations.

The scenarios follow the allocator's cases (dynamic-resource-allocation@v0.36.3/structured/
internal/stable/allocator_stable.go): template claims, a shared claim, class and request
selectors, a missing class, allocationMode All, firstAvailable, matchAttribute. The
template scenario needs kube-controller-manager's resourceclaim-controller (skipped,
naming the binary, without it); the others name their claims, one per pod, and need no
controller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import dra, sidebyside
from tests.e2e.dra import attribute_is, claim_spec, device, exactly, resource_slice, uses_claims
from tests.e2e.scenarios import container, node, pod, scenario

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

KUBE_SCHEDULER = "e2e-dra-kube-scheduler"
STANDALONE = "e2e-dra-standalone"
OTHER_DRIVER = "other.example.com"
SETTLE = 45.0  # a template pod first waits for its claim, then for kube-scheduler's backoff

# Scenario-specific checks on the settled state: (claims and pods, outcome) -> problems.
Expect = Callable[[dra.Settled, sidebyside.Outcome], list[str]]


@dataclass(frozen=True)
class DraScenario:
    name: str
    why: str
    nodes: tuple[dict[str, Any], ...]
    slices: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    bound: int  # how many pods end up bound; the others stay Pending
    on: frozenset[str]  # the nodes bound pods may be on
    claims: tuple[dict[str, Any], ...] = ()  # created in each run's namespace before the pods
    templates: tuple[dict[str, Any], ...] = ()
    classes: tuple[dict[str, Any], ...] = (dra.device_class("gpu"),)
    expect: tuple[Expect, ...] = ()
    attach: bool = False  # a stand-in driver sets allocated devices' binding conditions true

    def __str__(self) -> str:
        return self.name


def claims_for(names: list[str], spec: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    return tuple(dra.resource_claim(name, spec) for name in names)


def attachable_slice(node_name: str, pool: str, *names: str) -> dict[str, Any]:
    """A pool of devices that bind to their node only once attached (DRADeviceBindingConditions)."""
    made = resource_slice(node_name, [{"name": name, "bindsToNode": True, "bindingConditions": ["Attached"],
                                       "bindingFailureConditions": ["AttachFailed"]} for name in names])
    made["metadata"]["name"] = f"{node_name}-{pool}"
    made["spec"]["pool"]["name"] = pool
    return made


def partitioned_pool(node_name: str) -> tuple[dict[str, Any], ...]:
    """One GPU of 40Gi published as a whole device and two halves sharing its counter set
    (DRAPartitionableDevices): two slices of one pool, the counters in the first."""
    counters = resource_slice(node_name, [])
    counters["metadata"]["name"] = f"{node_name}-counters"
    counters["spec"]["pool"]["resourceSliceCount"] = 2
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]

    def part(name: str, size: str, memory: str) -> dict[str, Any]:
        return {**device(name, size=size), "consumesCounters": [
            {"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]}

    devices = resource_slice(node_name, [part("gpu-0-whole", "whole", "40Gi"), part("gpu-0-half-a", "half", "20Gi"),
                                         part("gpu-0-half-b", "half", "20Gi")])
    devices["spec"]["pool"]["resourceSliceCount"] = 2
    return counters, devices


SHARED_GPU = {"name": "shared-0", "allowMultipleAllocations": True, "capacity": {"memory": {
    "value": "80Gi", "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}}}}


def claim_pods(count: int, claim_prefix: str) -> tuple[dict[str, Any], ...]:
    """Pods p-0.. each naming its own claim <claim_prefix>-<i>."""
    return tuple(pod(f"p-{i}", **uses_claims(claims={"gpu": f"{claim_prefix}-{i}"})) for i in range(count))


# ---- scenario checks ---------------------------------------------------------------------------


def reserved_for_all(claim: str, pods: set[str]) -> Expect:
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        found = settled.claims.get(claim)
        got = dra.reserved_for(found) if found else set()
        return [] if got == pods else [f"claim {claim} reserved for {sorted(got)}, expected {sorted(pods)}"]
    return check


def devices_are(pod_name: str, *devices: tuple[str, str], any_of: bool = False) -> Expect:
    """``pod_name`` is bound and its claims hold exactly these (request, device) pairs (with
    ``any_of``: exactly one of them)."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        if pod_name not in outcome.bound:
            return [f"{pod_name} is not bound"]
        got = sorted(settled.devices_of(pod_name))
        fine = len(got) == 1 and got[0] in devices if any_of else got == sorted(devices)
        return [] if fine else [f"{pod_name} got {got}, expected {'one of ' if any_of else ''}{sorted(devices)}"]
    return check


def each_bound_got(pod_names: list[str], *devices: tuple[str, str]) -> Expect:
    """Those of ``pod_names`` that are bound hold exactly these (request, device) pairs."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        return [f"{p} got {settled.devices_of(p)}, expected {sorted(devices)}" for p in pod_names
                if p in outcome.bound and sorted(settled.devices_of(p)) != sorted(devices)]
    return check


def bound_devices(request: str, allowed: set[str]) -> Expect:
    """Every bound pod's devices are among ``allowed`` and were allocated for ``request``."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        return [f"{p} got {got}" for p in sorted(outcome.bound)
                if (got := settled.devices_of(p)) and any(r != request or d not in allowed for r, d in got)]
    return check


def attached(device_name: str) -> Expect:
    """The claim holding ``device_name`` carries its binding conditions, met, and its pod is bound."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        for name, claim in settled.claims.items():
            found = [r for r in dra.results(claim) if r["device"] == device_name]
            if not found:
                continue
            met = {c["type"] for d in (claim.get("status") or {}).get("devices") or [] if d["device"] == device_name
                   for c in d.get("conditions") or [] if c.get("status") == "True"}
            problems = [] if found[0].get("bindingConditions") == ["Attached"] else [
                f"claim {name}: result {found[0]} lacks the device's binding conditions"]
            problems += [] if "Attached" in met else [f"claim {name}: Attached not met"]
            pods = dra.reserved_for(claim)
            if not pods & set(outcome.bound):
                problems.append(f"claim {name} reserved for {sorted(pods)}, none of them bound")
            return problems
        return [f"no claim holds {device_name}"]
    return check


def shares_of(device_name: str, consumed: Mapping[str, str], capacity_gi: int) -> Expect:
    """Every bound pod holds a share of ``device_name`` consuming exactly ``consumed``, each with
    its own shareID, and the shares stay within the device's capacity (memory, Gi)."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        found, ids, total = [], set(), 0
        for bound in sorted(outcome.bound):
            for claim in settled.claims_of(bound).values():
                for r in dra.results(claim or {}):
                    if r["device"] != device_name or r.get("consumedCapacity") != dict(consumed):
                        found.append(f"{bound}: result {r}, expected a share of {device_name} consuming {consumed}")
                    ids.add(r.get("shareID"))
                    total += int(str(r.get("consumedCapacity", {}).get("memory", "0Gi")).removesuffix("Gi"))
        if None in ids or len(ids) != len(outcome.bound):
            found.append(f"share ids {ids} for {len(outcome.bound)} pods")
        if total > capacity_gi:
            found.append(f"shares of {device_name} consume {total}Gi of {capacity_gi}Gi")
        return found
    return check


def all_devices_of_node(counts: Mapping[str, int]) -> Expect:
    """allocationMode All: each bound pod holds every device of its node, and no two share a node."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        found = [f"{p} on {n} got {len(settled.devices_of(p))} devices, expected {counts.get(n)}"
                 for p, n in sorted(outcome.bound.items()) if len(settled.devices_of(p)) != counts.get(n)]
        if len(set(outcome.bound.values())) != len(outcome.bound):
            found.append(f"two pods share a node: {outcome.bound}")
        return found
    return check


def numa_matched(numa: Mapping[tuple[str, str], int]) -> Expect:
    """matchAttribute: the two devices of each bound pod have the same numa attribute."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        found = []
        for p, n in sorted(outcome.bound.items()):
            zones = {numa[(n, d)] for _, d in settled.devices_of(p)}
            if len(settled.devices_of(p)) != 2 or len(zones) != 1:
                found.append(f"{p} on {n} got {settled.devices_of(p)} (numa {sorted(zones)})")
        return found
    return check


def on_each_node(counts: Mapping[str, int]) -> Expect:
    """How many bound pods each node has."""
    def check(settled: dra.Settled, outcome: sidebyside.Outcome) -> list[str]:
        got = {n: sum(1 for bound in outcome.bound.values() if bound == n) for n in counts}
        return [] if got == dict(counts) else [f"pods per node {got}, expected {dict(counts)}"]
    return check


# ---- the scenarios -----------------------------------------------------------------------------

ONE_GPU = claim_spec(exactly("gpu", "gpu"))
A100 = exactly("a100", "gpu", attribute_is("model", "a100"))
NUMA = {("g-1", "gpu-0"): 0, ("g-1", "gpu-1"): 1, ("g-2", "gpu-0"): 0, ("g-2", "gpu-1"): 0}

SCENARIOS = [
    DraScenario(
        "template-claims",
        "each pod gets its own claim from the template: 2 devices on one node of 3, 3 pods: 2 bound there",
        nodes=(node("a-1"), node("a-2"), node("a-3")),
        slices=(resource_slice("a-2", [device("gpu-0"), device("gpu-1")]),),
        templates=(dra.claim_template("one-gpu", ONE_GPU),),
        pods=tuple(pod(f"p-{i}", **uses_claims(templates={"gpu": "one-gpu"})) for i in range(3)),
        bound=2, on=frozenset({"a-2"}),
    ),
    DraScenario(
        "shared-claim",
        "one claim named by 3 pods: allocated once, every pod on the node of its device, reserved for all",
        nodes=(node("b-1"), node("b-2"), node("b-3")),
        slices=(resource_slice("b-3", [device("gpu-0")]),),
        claims=(dra.resource_claim("shared", ONE_GPU),),
        pods=tuple(pod(f"p-{i}", **uses_claims(claims={"gpu": "shared"})) for i in range(3)),
        bound=3, on=frozenset({"b-3"}),
        expect=(reserved_for_all("shared", {"p-0", "p-1", "p-2"}), devices_are("p-0", ("gpu", "gpu-0"))),
    ),
    DraScenario(
        "selectors",
        "the class selects the driver, the request a model: one a100 of this driver (another driver's a100 "
        "does not count), so one of two a100 pods is bound; the t4 pod goes to the t4 node",
        nodes=(node("c-1"), node("c-2")),
        slices=(resource_slice("c-1", [device("t4-0", model="t4"), device("t4-1", model="t4")]),
                resource_slice("c-2", [device("a100-0", model="a100")]),
                resource_slice("c-2", [device("a100-x", model="a100")], driver=OTHER_DRIVER)),
        claims=(*claims_for(["a100-0", "a100-1"], claim_spec(A100)),
                dra.resource_claim("t4", claim_spec(exactly("t4", "gpu", attribute_is("model", "t4"))))),
        pods=(*claim_pods(2, "a100"), pod("t4-user", **uses_claims(claims={"gpu": "t4"}))),
        bound=2, on=frozenset({"c-1", "c-2"}),
        expect=(each_bound_got(["p-0", "p-1"], ("a100", "a100-0")),
                devices_are("t4-user", ("t4", "t4-0"), ("t4", "t4-1"), any_of=True)),
    ),
    DraScenario(
        "missing-device-class",
        "a claim naming a DeviceClass that does not exist: its pod stays Pending; a pod of an existing class "
        "is bound",
        nodes=(node("d-1"),),
        slices=(resource_slice("d-1", [device("gpu-0")]),),
        claims=(dra.resource_claim("missing", claim_spec(exactly("gpu", "no-such-class"))),
                dra.resource_claim("fine", ONE_GPU)),
        pods=(pod("no-class", **uses_claims(claims={"gpu": "missing"})),
              pod("with-class", **uses_claims(claims={"gpu": "fine"}))),
        bound=1, on=frozenset({"d-1"}),
        expect=(devices_are("with-class", ("gpu", "gpu-0")),),
    ),
    DraScenario(
        "allocation-mode-all",
        "allocationMode All takes every matching device of the node: 2 on one node, 3 on another, "
        "none on the third; 3 pods: one per device node, the third Pending",
        nodes=(node("e-1"), node("e-2"), node("e-3")),
        slices=(resource_slice("e-1", [device(f"gpu-{i}") for i in range(2)]),
                resource_slice("e-2", [device(f"gpu-{i}") for i in range(3)])),
        claims=claims_for([f"all-{i}" for i in range(3)], claim_spec(exactly("gpu", "gpu", mode="All"))),
        pods=claim_pods(3, "all"),
        bound=2, on=frozenset({"e-1", "e-2"}),
        expect=(all_devices_of_node({"e-1": 2, "e-2": 3}),),
    ),
    DraScenario(
        "first-available",
        "firstAvailable: no h100 anywhere, so the a100 subrequest is allocated; the second pod finds neither",
        nodes=(node("f-1"), node("f-2")),
        slices=(resource_slice("f-1", [device("a100-0", model="a100")]),
                resource_slice("f-2", [device("t4-0", model="t4")])),
        claims=claims_for(["fa-0", "fa-1"], claim_spec(dra.first_available(
            "gpu", exactly("h100", "gpu", attribute_is("model", "h100")), A100))),
        pods=claim_pods(2, "fa"),
        bound=1, on=frozenset({"f-1"}),
        expect=(bound_devices("gpu/a100", {"a100-0"}),),
    ),
    DraScenario(
        "extended-resource",
        "DRAExtendedResource: example.com/gpu is served by the class that names it on the node without it "
        "in its allocatable (2 devices), and by the device plugin on the node that advertises 1: 4 pods, 3 bound",
        nodes=(node("h-1", extra_resources={"example.com/gpu": "1"}), node("h-2")),
        slices=(resource_slice("h-2", [device("gpu-0"), device("gpu-1")]),),
        classes=({**dra.device_class("gpu"), "spec": {**dra.device_class("gpu")["spec"],
                                                       "extendedResourceName": "example.com/gpu"}},),
        pods=tuple(pod(f"p-{i}", containers=[container("main", extended={"example.com/gpu": "1"})])
                   for i in range(4)),
        bound=3, on=frozenset({"h-1", "h-2"}),
        expect=(on_each_node({"h-1": 1, "h-2": 2}),),
    ),
    DraScenario(
        "binding-conditions-pool-order",
        "DRADeviceBindingConditions: a pool of devices that must be attached is tried after the others, though "
        "its name sorts first: the one pod gets the plain device",
        nodes=(node("i-1"),),
        slices=(attachable_slice("i-1", "a-fabric", "fab-0"), resource_slice("i-1", [device("gpu-0")])),
        claims=claims_for(["bc-0"], ONE_GPU),
        pods=claim_pods(1, "bc"),
        bound=1, on=frozenset({"i-1"}), attach=True,
        expect=(devices_are("p-0", ("gpu", "gpu-0")),),
    ),
    DraScenario(
        "binding-conditions-attach",
        "DRADeviceBindingConditions: the only device must be attached; its pod is bound once the driver sets "
        "the condition, the other stays Pending",
        nodes=(node("j-1"), node("j-2")),
        slices=(attachable_slice("j-2", "j-2-fabric", "fab-0"),),
        claims=claims_for([f"bc-{i}" for i in range(2)], ONE_GPU),
        pods=claim_pods(2, "bc"),
        bound=1, on=frozenset({"j-2"}), attach=True,
        expect=(bound_devices("gpu", {"fab-0"}), attached("fab-0")),
    ),
    DraScenario(
        "partitionable",
        "DRAPartitionableDevices: two halves and a whole GPU share one 40Gi counter set: the two halves are "
        "taken, then neither a third half nor the whole fits: 4 pods, 2 bound",
        nodes=(node("k-1"), node("k-2")),
        slices=partitioned_pool("k-1"),
        claims=(*claims_for(["half-0", "half-1", "half-2"], claim_spec(exactly("gpu", "gpu", attribute_is("size", "half")))),
                dra.resource_claim("whole", claim_spec(exactly("gpu", "gpu", attribute_is("size", "whole"))))),
        pods=(*claim_pods(3, "half"), pod("whole-user", **uses_claims(claims={"gpu": "whole"}))),
        bound=2, on=frozenset({"k-1"}),
        expect=(bound_devices("gpu", {"gpu-0-half-a", "gpu-0-half-b"}),),
    ),
    DraScenario(
        "consumable-capacity",
        "DRAConsumableCapacity: one 80Gi device shared by claims asking 25Gi each, which its request policy "
        "(10Gi steps) rounds to 30Gi: two shares fit, the third does not: 3 pods, 2 bound",
        nodes=(node("m-1"),),
        slices=(resource_slice("m-1", [SHARED_GPU]),),
        classes=(dra.device_class("shared", dra.cel("device.allowMultipleAllocations == true")),),
        claims=claims_for([f"share-{i}" for i in range(3)], claim_spec(
            {"name": "gpu", "exactly": {"deviceClassName": "shared", "allocationMode": "ExactCount", "count": 1,
                                        "capacity": {"requests": {"memory": "25Gi"}}}})),
        pods=claim_pods(3, "share"),
        bound=2, on=frozenset({"m-1"}),
        expect=(shares_of("shared-0", {"memory": "30Gi"}, 80),),
    ),
    DraScenario(
        "device-taints",
        "DRADeviceTaints: a NoSchedule-tainted device goes only to the claim that tolerates it, a NoExecute one "
        "to none: 2 pods, the tolerating one bound",
        nodes=(node("n-1"),),
        slices=(resource_slice("n-1", [
            {**device("gpu-0"), "taints": [{"key": "maintenance", "value": "soon", "effect": "NoSchedule"}]},
            {**device("gpu-1"), "taints": [{"key": "ecc", "value": "fatal", "effect": "NoExecute"}]}]),),
        claims=(dra.resource_claim("tolerant", claim_spec({"name": "gpu", "exactly": {
                    "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
                    "tolerations": [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]}})),
                dra.resource_claim("strict", ONE_GPU)),
        pods=(pod("tolerant-user", **uses_claims(claims={"gpu": "tolerant"})),
              pod("strict-user", **uses_claims(claims={"gpu": "strict"}))),
        bound=1, on=frozenset({"n-1"}),
        expect=(devices_are("tolerant-user", ("gpu", "gpu-0")),),
    ),
    DraScenario(
        "implicit-extended-resource",
        "DRAExtendedResource: deviceclass.resource.kubernetes.io/gpu is served by the class gpu, which names "
        "no extended resource: 2 devices, 3 pods, 2 bound",
        nodes=(node("o-1"), node("o-2")),
        slices=(resource_slice("o-2", [device("gpu-0"), device("gpu-1")]),),
        pods=tuple(pod(f"p-{i}", containers=[container("main", extended={"deviceclass.resource.kubernetes.io/gpu": "1"})])
                   for i in range(3)),
        bound=2, on=frozenset({"o-2"}),
    ),
    DraScenario(
        "match-attribute",
        "two requests that must agree on numa: only the node whose two devices share a numa node fits, once",
        nodes=(node("g-1"), node("g-2")),
        slices=(resource_slice("g-1", [device("gpu-0", numa=0), device("gpu-1", numa=1)]),
                resource_slice("g-2", [device("gpu-0", numa=0), device("gpu-1", numa=0)])),
        claims=claims_for(["pair-0", "pair-1"], claim_spec(
            exactly("first", "gpu"), exactly("second", "gpu"),
            match_attribute=(f"{dra.DRIVER}/numa", ["first", "second"]))),
        pods=claim_pods(2, "pair"),
        bound=1, on=frozenset({"g-2"}),
        expect=(numa_matched(NUMA),),
    ),
]


def problems(case: DraScenario, outcome: sidebyside.Outcome, settled: dra.Settled) -> list[str]:
    """Every way one scheduler's outcome misses the scenario."""
    found = []
    if len(outcome.bound) != case.bound:
        found.append(f"bound {sorted(outcome.bound)}, expected {case.bound} of {[p['name'] for p in case.pods]}")
    if outcome.deleted:
        found.append(f"deleted {sorted(outcome.deleted)}")
    found += [f"{p} on {n}, allowed {sorted(case.on)}" for p, n in sorted(outcome.bound.items()) if n not in case.on]
    found += settled.problems(outcome.bound, outcome.pending)
    for check in case.expect:
        found += check(settled, outcome)
    return [f"{outcome.scheduler}: {p}" for p in found]


@pytest.fixture
def dra_cleanup(cluster: Any) -> Iterator[None]:
    """Removes the DRA objects before and after the test (the wipe between tests does not)."""
    namespaces = ["e2e-dra-kube-scheduler", "e2e-dra-standalone"]
    dra.purge(cluster.client, namespaces)
    yield
    dra.purge(cluster.client, namespaces)


@pytest.mark.parametrize("case", SCENARIOS, ids=str)
def test_dra_pods_bound_and_pending_alike(cluster: Any, dra_cleanup: None, kube_scheduler: Any, extender: Any,
                                          tmp_path: Path, request: pytest.FixtureRequest, case: DraScenario) -> None:
    kube = cluster.client
    if case.templates:
        request.getfixturevalue("kube_controller_manager")
    plain = scenario(case.name, case.why, nodes=list(case.nodes), pods=list(case.pods), bound=set())
    sidebyside.create_nodes(kube, plain)
    for obj in (*case.classes, *case.slices):
        dra.create(kube, obj)

    @contextlib.contextmanager
    def claims_in(namespace: str) -> Iterator[None]:
        for obj in (*case.claims, *case.templates):
            dra.create(kube, obj, namespace)
        try:
            with dra.attaching(kube, namespace) if case.attach else contextlib.nullcontext():
                yield
        finally:
            kube.purge(dra.collection("ResourceClaim", namespace))
            kube.purge(dra.collection("ResourceClaimTemplate", namespace))

    @contextlib.contextmanager
    def kube_scheduler_running() -> Iterator[Any]:
        with claims_in("e2e-dra-kube-scheduler"), sidebyside.kube_scheduler_running(
                kube_scheduler, KUBE_SCHEDULER, f"kube-scheduler-{case.name}") as process:
            yield process

    @contextlib.contextmanager
    def standalone_running() -> Iterator[Any]:
        with claims_in("e2e-dra-standalone"), sidebyside.standalone_running(
                extender, cluster.kubeconfig, tmp_path, STANDALONE, f"schedule-{case.name}") as process:
            yield process

    settled: dict[str, dra.Settled] = {}
    runs = [("kube-scheduler", KUBE_SCHEDULER, "e2e-dra-kube-scheduler", kube_scheduler_running),
            ("standalone", STANDALONE, "e2e-dra-standalone", standalone_running)]
    outcomes = []
    for label, scheduler_name, namespace, start in runs:
        def read(outcome: sidebyside.Outcome, namespace: str = namespace) -> None:
            settled[outcome.scheduler] = dra.Settled.read(kube, namespace)

        outcomes.append(sidebyside.run(
            kube, plain, scheduler=label, scheduler_name=scheduler_name, namespace=namespace, start=start,
            timeout=SETTLE, transient=dra.TRANSIENT, inspect=read,
        ))  # fmt: skip
    theirs, ours = outcomes
    summary = [case.why, *(o.summary() for o in outcomes)]
    assert not (found := problems(case, theirs, settled["kube-scheduler"])), "\n".join([*found, *summary])
    assert not (found := problems(case, ours, settled["standalone"])), "\n".join([*found, *summary])
