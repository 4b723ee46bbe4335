"""Property: placing pods one after another with the engine never over-commits a node.

Each pod goes to the best feasible node, whose NodeInfo then counts the pod (what
assuming does); whatever the nodes and pods, no node's requests may exceed its
allocatable for any resource, nor its pod count exceed allocatable pods. And the
engine refuses no node that the pod fits.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.policy.defaults import default_policy
from extender.policy.engine import Engine

from .builders import make_node, make_pod, with_pods

RESOURCES = ("cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/gpu")
UNITS = {"cpu": "m", "memory": "Mi", "ephemeral-storage": "Mi", "hugepages-2Mi": "Mi", "example.com/gpu": ""}

amounts = st.integers(min_value=0, max_value=4000)


@st.composite
def node_specs(draw):
    extra = {name: f"{draw(amounts)}{UNITS[name]}" for name in RESOURCES[2:] if draw(st.booleans())}
    return {
        "cpu": f"{draw(amounts)}m",
        "memory": f"{draw(amounts)}Mi",
        "pods": str(draw(st.integers(min_value=0, max_value=8))),
        "extra": extra,
    }


def sometimes(draw, name):
    # cpu and memory are asked for half the time, the rarer resources a quarter of the time.
    return draw(st.booleans()) if name in ("cpu", "memory") else draw(st.integers(0, 3)) == 0


@st.composite
def pod_specs(draw):
    small = st.integers(min_value=0, max_value=1500)
    requests = {name: f"{draw(small)}{UNITS[name]}" for name in RESOURCES if sometimes(draw, name)}
    init = None
    if draw(st.booleans()):
        init = [{"name": "init", "resources": {"requests": {"cpu": f"{draw(small)}m"}}}]
        if draw(st.booleans()):
            init.append({"name": "side", "restartPolicy": "Always",
                         "resources": {"requests": {"memory": f"{draw(small)}Mi"}}})
    return {"requests": requests, "init": init}


def fits(pod, info):
    allocatable = info.node.allocatable
    if info.pod_count + 1 > allocatable.get("pods", 0):
        return False
    return all(amount <= allocatable.get(name, 0) - info.requested.get(name, 0) for name, amount in pod.requests.items())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_specs(), min_size=1, max_size=6), st.lists(pod_specs(), min_size=1, max_size=25))
def test_placements_never_overcommit(nodes, pods):
    engine = Engine(default_policy("standalone"))
    infos = [make_node(f"n{i}", **spec) for i, spec in enumerate(nodes)]
    for index, spec in enumerate(pods):
        pod = make_pod(
            f"p{index}",
            containers=[{"name": "c", "resources": {"requests": spec["requests"]}}],
            init_containers=spec["init"],
        )
        decision = engine.decide(pod, infos)
        # And no false refusals: a node is feasible exactly when the pod fits what it has left.
        assert {info.name for info in decision.feasible} == {info.name for info in infos if fits(pod, info)}
        if not decision.feasible:
            continue
        best = decision.ranking()[0][0]
        position = next(i for i, info in enumerate(infos) if info.name == best.name)
        infos[position] = with_pods(best, [pod])
    for info in infos:
        allocatable = info.node.allocatable
        assert info.pod_count <= allocatable.get("pods", 0), info.name
        for resource, used in info.requested.items():
            assert used <= allocatable.get(resource, 0), (info.name, resource)
