"""`extender replay --devices dra`: the GPUs as DRA devices with consumable capacity and a claim per
GPU pod give the same runs as the annotation model, for every shipped policy; DeviceFit's DRA
allocations follow its strategy and never exceed a device's capacity; bad input is refused with
a clear reason."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from extender.cli.replay import replay
from extender.cluster.dra_store import CLAIMS, CLASSES, SLICES
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.dra.objects import DeviceID
from extender.model.devices import ASSIGNMENT_ANNOTATION
from extender.model.pods import PodView
from extender.policy.builtin import gpu_claims
from extender.policy.builtin.gpu_choice import gpu_state, pod_gpus
from extender.policy.engine import Engine
from extender.policy.loading import load_policy, load_policy_file
from extender.replay import dra_model
from extender.replay.runner import ReplayError, _check_dra_capacity, run
from extender.replay.traces import openb_node, openb_pod, read_trace
from extender.simulation.placing import Placer, Taken
from tests.replay.traces import small_cluster, write_nodes, write_pods

POLICIES = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd"]


@pytest.fixture
def trace_files(tmp_path: Path) -> tuple[Path, Path]:
    return small_cluster(tmp_path)


def _typed_cluster(tmp_path: Path) -> tuple[Path, Path]:
    """Mixed models and model specs (substring rules), shares of many sizes, whole and 2-GPU pods,
    CPU-only pods: 40 GPUs, demand well past them at tune 1.3."""
    nodes = write_nodes(tmp_path / "typed-nodes.csv", [
        "a0,32000,131072,2,T4", "a1,16000,65536,4,T4", "b0,64000,262144,4,V100M16", "b1,64000,262144,8,V100M32",
        "c0,96000,393216,8,G2", "c1,96000,393216,8,G2", "d0,8000,32768,1,P100", "d1,128000,524288,5,G3"])
    rng = random.Random(7)
    specs = ["", "", "", "T4", "V100M16|V100M32", "G2", "G3|P100"]
    rows = []
    for i in range(90):
        kind = rng.randrange(6)
        spec = rng.choice(specs)
        if kind < 3:
            rows.append(f"t{i:03d},{rng.randrange(1, 16) * 1000},8192,1,{rng.randrange(1, 100) * 10},{spec}")
        elif kind == 3:
            rows.append(f"t{i:03d},{rng.randrange(2, 24) * 1000},16384,1,1000,{spec}")
        elif kind == 4:
            rows.append(f"t{i:03d},{rng.randrange(4, 40) * 1000},32768,{rng.choice((2, 4))},1000,{spec}")
        else:
            rows.append(f"t{i:03d},{rng.randrange(1, 30) * 1000},8192,0,0,")
    return nodes, write_pods(tmp_path / "typed-pods.csv", rows)


def _both(trace: Any, policy: str, seed: int, **kwargs: Any) -> Iterator[tuple[Any, list[str | None]]]:
    for devices in dra_model.DEVICES:
        nodes: dict[int, str | None] = {}
        result = run(trace, policy, seed, devices=devices, placed_on=nodes.__setitem__, **kwargs)
        yield result, [nodes[i] for i in range(len(nodes))]


@pytest.mark.parametrize("name", POLICIES)
def test_both_device_models_place_every_pod_alike(trace_files, tmp_path, name):
    for nodes, pods in (trace_files, _typed_cluster(tmp_path)):
        trace = read_trace(nodes=str(nodes), pods=str(pods))
        for seed in (42, 43):
            (annotation, on_annotation), (dra, on_dra) = _both(trace, f"config/replay/{name}.yaml", seed)
            assert 0 < annotation.placed < annotation.pods  # some dropped: the curve's shape matters
            assert on_dra == on_annotation  # every pod on the same node, or dropped alike
            assert dra.curve == annotation.curve and dra.placed == annotation.placed
            # the fragmentation curve reads every GPU's free share: the GPU chosen inside each node matched too
            assert dra.fragmentation == annotation.fragmentation
            assert dra.gpu_milli == annotation.gpu_milli
            assert dra.free_gpus_at_100 == annotation.free_gpus_at_100 and annotation.free_gpus_at_100


def test_fgd_learning_its_workload_online_learns_the_same_from_claims(tmp_path):
    nodes, pods = _typed_cluster(tmp_path)
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    (annotation, on_annotation), (dra, on_dra) = _both(trace, "config/replay/fgd.yaml", 5, workload="online")
    assert on_dra == on_annotation and dra.curve == annotation.curve


def test_the_cli_gives_the_same_json_curves_with_dra_devices(trace_files):
    nodes, pods = trace_files
    lines = {}
    for devices in ("annotation", "dra"):
        result = CliRunner().invoke(replay, ["--nodes", str(nodes), "--pods", str(pods), "--policy",
                                             "config/replay/fgd.yaml", "--seed", "1-2", "--jobs", "2", "--json",
                                             "--devices", devices])
        assert result.exit_code == 0, result.output
        lines[devices] = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(x["seed"], x["placed"], x["curve"]) for x in lines["dra"]] == \
        [(x["seed"], x["placed"], x["curve"]) for x in lines["annotation"]]


# ---- DeviceFit placing a pod's own claim ---------------------------------------------------------


def _cluster(nodes: list[dict[str, Any]]) -> ClusterState:
    stripped, objects = dra_model.as_dra(nodes, ())
    state = ClusterState(assume_ttl=float("inf"))
    state.replace_nodes(list(stripped))
    state.dra_store.replace(CLASSES, [o for o in objects if o["kind"] == "DeviceClass"])
    state.dra_store.replace(SLICES, [o for o in objects if o["kind"] == "ResourceSlice"])
    state.dra_store.replace(CLAIMS, [])
    return state


def _pod(state: ClusterState, name: str, milli: int, count: int = 1, spec: tuple[str, ...] = ()) -> PodView:
    raw = openb_pod(name, 1000, 1024, count, milli, spec)
    raw["metadata"]["uid"] = f"uid-{name}"
    pod, claim = dra_model.dra_pod(raw, f"uid-{name}")
    assert claim is not None
    state.dra_store.upsert(CLAIMS, claim)
    return PodView.from_dict(pod)


def _place(state: ClusterState, policy: Any, pod: PodView) -> str | None:
    placer = Placer(Engine(policy), state, MemoryBinder(state), random.Random(1), 100)
    taken = placer.take(pod, preempting=False)
    if not isinstance(taken, Taken):
        return None
    placer.bind(taken)
    return taken.placement.node


def _policy(strategy: str, *, dynamic_resources: bool = False) -> Any:
    filters = [{"name": "ResourceFit", "args": {"ignoredResourceGroups": ["extender.example"]}},
               {"name": "DeviceFit", "args": {"strategy": strategy}}]
    if dynamic_resources:
        filters.append({"name": "DynamicResources"})
    return load_policy({"apiVersion": "extender/v1alpha1", "kind": "Policy", "filters": filters,
                        "scores": [{"name": "GpuBestFit", "weight": 1}]})


def _allocated(state: ClusterState, pod: PodView) -> list[str]:
    claim = state.dra_store.claim(pod.namespace, f"{pod.name}-gpu")
    assert claim is not None and claim.allocation is not None
    assert [ref.uid for ref in claim.reserved_for] == [pod.uid]
    return [result.device for result in claim.allocation.results]


def test_the_allocation_takes_the_gpus_the_strategy_chose_not_the_first_that_fit():
    state = _cluster([openb_node("n", 32000, 65536, 3, "T4")])
    policy = _policy("binpack")
    first = _pod(state, "first", 500)
    assert _place(state, policy, first) == "n" and _allocated(state, first) == ["gpu0"]
    # binpack: the fullest GPU that fits is gpu0 again (500 + 300); for 600 it is a free one, the first
    second = _pod(state, "second", 300)
    assert _place(state, policy, second) == "n" and _allocated(state, second) == ["gpu0"]
    third = _pod(state, "third", 600)
    assert _place(state, policy, third) == "n" and _allocated(state, third) == ["gpu1"]
    fourth = _pod(state, "fourth", 350)  # gpu1 (400 free) is fuller than gpu2 (1000), gpu0 (200) too small
    assert _place(state, policy, fourth) == "n" and _allocated(state, fourth) == ["gpu1"]
    spread = _pod(state, "spread", 100)
    assert _place(state, _policy("spread"), spread) == "n" and _allocated(state, spread) == ["gpu2"]
    # the assignment annotation bound with the pod names the same device (its inventory id) and share
    record = state.pod("replay/fourth")
    assert record is not None and record.devices == (("n-gpu1", 350, 35),)


def test_with_dynamic_resources_listed_it_allocates_the_claim_first_fit():
    state = _cluster([openb_node("n", 32000, 65536, 2, "T4")])
    policy = _policy("binpack", dynamic_resources=True)
    fit = next(p for p in policy.filters if p.name == "DeviceFit")
    assert not fit.places_claims
    first = _pod(state, "first", 500)
    assert _place(state, policy, first) == "n" and _allocated(state, first) == ["gpu0"]
    state.dra_store.upsert(CLAIMS, {**state.dra_store.claim("replay", "first-gpu").raw})
    second = _pod(state, "second", 200)
    assert _place(state, policy, second) == "n"
    assert _allocated(state, second) == ["gpu0"]  # first fit: gpu0 (kube-scheduler's order) has room


def test_a_dra_allocation_never_takes_more_than_a_gpu_has():
    state = _cluster([openb_node("n", 64000, 65536, 2, "T4")])
    policy = load_policy_file("config/replay/fgd.yaml")
    placed = [_place(state, policy, _pod(state, f"p{i}", milli)) for i, milli in
              enumerate((600, 600, 500, 400, 400, 300, 1000))]
    # 600+400 on one GPU, 600+400 on the other; then nothing of 500, 300 or a whole GPU fits
    assert placed == ["n", "n", None, "n", "n", None, None]
    consumed = state.dra_store.consumed()
    for gpu in ("gpu0", "gpu1"):
        taken = consumed[DeviceID(dra_model.DRIVER, "n", gpu)]
        assert taken == {"memory": Fraction(1000 * 2**20), "cores": Fraction(100)}
    assert gpu_state(state.node_info("n"), state, dra_model.DEVICE_CLASS).free == (0, 0)


def test_the_replays_capacity_check_catches_an_overcommitted_device(trace_files):
    state = _cluster([openb_node("n", 64000, 65536, 1, "T4")])
    claim = state.dra_store.claims()
    assert claim == []
    allocation = {"devices": {"results": [
        {"request": "gpu", "driver": dra_model.DRIVER, "pool": "n", "device": "gpu0", "shareID": f"s{i}",
         "consumedCapacity": {"cores": "60", "memory": "600Mi"}} for i in range(2)]}}
    state.dra_store.upsert(CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "forged", "namespace": "replay", "uid": "forged", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": dra_model.DEVICE_CLASS,
                                                                     "count": 2}}]}},
        "status": {"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "x", "uid": "x"}]}})
    trace = read_trace(nodes=str(trace_files[0]), pods=str(trace_files[1]))
    with pytest.raises(ReplayError, match="n/gpu0 has 1200Mi of its memory consumed, more than its 1000Mi"):
        _check_dra_capacity(state, trace)


def test_the_policies_read_a_claims_shape_and_types():
    state = _cluster([openb_node("n", 32000, 65536, 2, "T4")])
    pod = _pod(state, "typed", 250, spec=("T4", "V100M16"))
    shape, source = pod_gpus(pod, state)
    assert (shape.milli, shape.count, shape.types, source) == (250, 1, ("t4", "v100m16"), dra_model.DEVICE_CLASS)
    whole = _pod(state, "whole", 1000, count=2)
    assert pod_gpus(whole, state)[0].milli == 1000 and pod_gpus(whole, state)[0].count == 2
    assert gpu_claims.selector_types(gpu_claims.type_selector("d.example", ["T4", "A100"])) == ("t4", "a100")
    assert gpu_claims.selector_types('device.attributes["d"].memory > 3') is None


# ---- bad input ------------------------------------------------------------------------------------


def _claim_pod(state: ClusterState, name: str, request: dict[str, Any], *, claims: int = 1) -> PodView:
    refs = []
    for i in range(claims):
        claim_name = f"{name}-{i}"
        state.dra_store.upsert(CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim_name, "namespace": "replay", "uid": f"c-{claim_name}", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}})
        refs.append({"name": f"gpu{i}", "resourceClaimName": claim_name})
    return PodView.from_dict({"metadata": {"name": name, "namespace": "replay", "uid": f"u-{name}"},
                              "spec": {"containers": [{"name": "c"}], "resourceClaims": refs},
                              "status": {"phase": "Pending"}})


@pytest.mark.parametrize(("request_", "claims", "message"), [
    ({"deviceClassName": dra_model.DEVICE_CLASS, "count": 1, "capacity": {"requests": {"bandwidth": "1"}}}, 1,
     "asks for capacities besides memory and cores"),
    ({"deviceClassName": dra_model.DEVICE_CLASS, "count": 1, "capacity": {"requests": {"cores": "150"}}}, 1,
     "cores 150 is more than a whole GPU"),
    ({"deviceClassName": dra_model.DEVICE_CLASS, "allocationMode": "All"}, 1, "places ExactCount requests"),
    ({"deviceClassName": "nope", "count": 1}, 1, "device class nope does not exist"),
    ({"deviceClassName": dra_model.DEVICE_CLASS, "count": 1}, 2, "names 2 claims; DeviceFit places one"),
])
def test_claims_deviceFit_cannot_place_are_refused_saying_why(request_, claims, message):
    state = _cluster([openb_node("n", 32000, 65536, 2, "T4")])
    pod = _claim_pod(state, "bad", request_, claims=claims)
    found = gpu_claims.pod_claim_gpus(pod, state.dra())
    assert not isinstance(found, gpu_claims.ClaimGpus)
    assert message in " ".join((*found.reasons, found.detail))
    assert _place(state, _policy("binpack"), pod) is None  # and the pod is not placed


def test_bad_devices_input_is_one_line(trace_files, tmp_path):
    nodes, pods = trace_files
    result = CliRunner().invoke(replay, ["--nodes", str(nodes), "--pods", str(pods), "--policy",
                                         "config/replay/fgd.yaml", "--devices", "nvlink"])
    assert result.exit_code == 2 and "'nvlink' is not one of 'annotation', 'dra'" in result.output
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    with pytest.raises(ReplayError, match="devices: 'x' is not one of annotation, dra"):
        run(trace, "config/replay/fgd.yaml", 1, devices="x")
    # a snapshot whose bound pods hold GPU shares cannot be turned into claims
    node = openb_node("g", 8000, 8192, 1, "T4")
    bound = openb_pod("held", 1000, 1024, 1, 500, ())
    bound["spec"]["nodeName"] = "g"
    bound["metadata"]["annotations"] = {ASSIGNMENT_ANNOTATION: json.dumps(
        {"node": "g", "containers": {"task": [{"id": "g-gpu0", "memory": 500, "cores": 50}]}})}
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, bound]}))
    pods = write_pods(tmp_path / "more.csv", ["a,1000,100,1,500,T4", "b,1000,100,0,0,"])
    result = CliRunner().invoke(replay, ["--snapshot", str(snapshot), "--pods", str(pods), "--policy",
                                         "config/replay/fgd.yaml", "--devices", "dra"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {snapshot}: pod replay/held of the snapshot holds GPU shares (extender.example/gpu-assignment): "
        "--devices dra replays snapshots without bound GPU pods"]


def test_claims_it_does_not_see_or_that_are_allocated_are_left_alone():
    """A webhook does not watch claims (kube-scheduler allocates them): DeviceFit ignores the pod's
    claims there, as before, and so it does once a claim is allocated (by DynamicResources)."""
    state = _cluster([openb_node("n", 32000, 65536, 2, "T4")])
    fit = next(p for p in _policy("binpack").filters if p.name == "DeviceFit")
    unseen = PodView.from_dict({"metadata": {"name": "u", "namespace": "replay", "uid": "u"},
                                "spec": {"containers": [{"name": "c"}],
                                         "resourceClaims": [{"name": "gpu", "resourceClaimName": "elsewhere"}]},
                                "status": {"phase": "Pending"}})
    assert gpu_claims.pod_claim_gpus(unseen, state.dra()) is None and fit.prefilter(unseen, state) is None
    pod = _pod(state, "placed", 500)
    assert _place(state, _policy("binpack"), pod) == "n"
    assert gpu_claims.pod_claim_gpus(pod, state.dra()) is None  # allocated and reserved now


def test_fgd_and_random_choose_on_dra_devices_with_extended_resources_too():
    """DeviceFit's `fgd` choice with `deviceClass` (pods asking through extended resources, the
    shares recorded as DRA allocations): the GPU that strands least, where binpack takes the fullest."""
    def run_with(strategy: str) -> tuple[list[str], tuple[int, ...]]:
        state = _cluster([openb_node("n", 32000, 65536, 2, "T4")])
        args = {"strategy": strategy, "deviceClass": dra_model.DEVICE_CLASS}
        if strategy == "fgd":
            args["workload"] = [{"cpu": 1000, "gpuMilli": 600, "gpus": 1}]
        policy = load_policy({"apiVersion": "extender/v1alpha1", "kind": "Policy", "filters": [
            {"name": "ResourceFit", "args": {"ignoredResourceGroups": ["extender.example"]}},
            {"name": "DeviceFit", "args": args}]})
        got = []
        for name, milli in (("a", 400), ("b", 400)):
            raw = openb_pod(name, 1000, 1024, 1, milli, ())
            raw["metadata"]["uid"] = f"uid-{name}"
            pod = PodView.from_dict(raw)
            assert _place(state, policy, pod) == "n"
            claim = state.dra_store.extended_claim_of(pod.uid)
            assert claim is not None and claim.allocation is not None
            got += [result.device for result in claim.allocation.results]
        return got, gpu_state(state.node_info("n"), state, "").free  # the scorers read it from DRA

    assert run_with("binpack") == (["gpu0", "gpu0"], (200, 1000))
    assert run_with("fgd") == (["gpu0", "gpu1"], (600, 600))  # (600, 600) strands nothing for the 600 shares
    chosen, free = run_with("random")
    assert set(chosen) <= {"gpu0", "gpu1"} and sum(free) == 1200


def test_the_stores_running_totals_are_what_summing_every_allocation_gives():
    """DraStore keeps consumed capacity and sharers as allocations come and go (SharedTotals): at
    every step the same as objects.consumed_capacity over the allocations held (a device or a
    capacity name only while some share reports it)."""
    from collections import Counter

    from extender.cluster.dra_store import SharedTotals
    from extender.dra.objects import Allocation, consumed_capacity

    rng = random.Random(3)

    def allocation(i: int) -> Allocation:
        results = []
        for j in range(rng.randrange(1, 4)):
            consumed = {name: f"{rng.randrange(1, 9)}" for name in rng.sample(["memory", "cores"], rng.randrange(3))}
            results.append({"request": "gpu", "driver": "d", "pool": "p", "device": f"g{rng.randrange(3)}",
                            "shareID": f"s{i}-{j}", **({"consumedCapacity": consumed} if consumed else {})})
        if rng.random() < 0.3:
            results.append({"request": "gpu", "driver": "d", "pool": "p", "device": "whole"})  # no share
        return Allocation.parse({"devices": {"results": results}})

    totals = SharedTotals()
    held: dict[int, Allocation] = {}
    for step in range(300):
        if held and rng.random() < 0.45:
            key = rng.choice(sorted(held))
            totals.add(held.pop(key), -1)
        else:
            held[step] = allocation(step)
            totals.add(held[step], 1)
        assert totals.consumed == consumed_capacity(held.values())
        assert totals.sharers == Counter(r.id for a in held.values() for r in {x.id: x for x in a.results
                                                                             if x.share_id}.values())
