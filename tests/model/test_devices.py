"""The shared-device contract: node inventories, pod requests, assignments and the device choice."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.errors import InvalidObject
from extender.model import devices as dev
from extender.model.devices import (
    REASON_CORES,
    REASON_MEMORY,
    REASON_NO_DEVICES,
    REASON_TOO_FEW,
    REASON_TOO_SMALL,
    REASON_TYPE,
    REASON_UNHEALTHY,
    Assignment,
    ContainerRequest,
    DeviceRequest,
    Shortfall,
    Use,
    choose,
    device_request,
    node_inventory,
    parse_assignment,
    parse_inventory,
    shortage,
    utilisation,
)
from extender.model.records import record_from_dict
from tests.devicebuilders import assignment_text, gpu, gpu_limits, gpu_pod_dict, inventory

# ---- inventory ----------------------------------------------------------------------------


def test_inventory_reads_every_field_with_defaults() -> None:
    parsed = parse_inventory(json.dumps({"devices": [
        {"id": "GPU-0", "type": "A100", "memory": 40960, "cores": 50, "healthy": False},
        {"id": "GPU-1", "memory": 16384},
    ]}))
    assert parsed.error == ""
    first, second = parsed.devices
    assert (first.id, first.type, first.memory, first.cores, first.healthy, first.index) == \
        ("GPU-0", "A100", 40960, 50, False, 0)
    assert (second.type, second.cores, second.healthy, second.index) == ("", 100, True, 1)
    assert parsed.capacity("GPU-1") == (16384, 100)


@pytest.mark.parametrize(("text", "message"), [
    ("{devices: [", "is not JSON"),
    ("[]", "expected an object with a devices list"),
    ('{"devices": {}}', "devices: expected a list"),
    ('{"version": 2, "devices": []}', "version: 2 is not supported"),
    ('{"devices": ["GPU-0"]}', "devices[0]: expected an object"),
    ('{"devices": [{"memory": 1}]}', "devices[0].id: expected a non-empty string"),
    ('{"devices": [{"id": "a", "memory": 0}]}', "devices[0].memory (MiB): expected an integer from 1"),
    ('{"devices": [{"id": "a", "memory": "16Gi"}]}', "devices[0].memory (MiB)"),
    ('{"devices": [{"id": "a", "memory": true}]}', "devices[0].memory (MiB)"),
    ('{"devices": [{"id": "a", "memory": 1, "cores": 101}]}', "devices[0].cores (percent): expected an integer from 1 to 100"),
    ('{"devices": [{"id": "a", "memory": 1, "healthy": "yes"}]}', "devices[0].healthy: expected true or false"),
    ('{"devices": [{"id": "a", "memory": 1, "type": 3}]}', "devices[0].type: expected a string"),
    ('{"devices": [{"id": "a", "memory": 1}, {"id": "a", "memory": 2}]}', "id 'a' appears twice"),
    ("[" * 100000, "is not JSON"),
])
def test_a_bad_inventory_is_an_error_naming_the_field(text: str, message: str) -> None:
    parsed = parse_inventory(text)
    assert parsed.devices == ()
    assert message in parsed.error
    assert parsed.error.startswith(dev.INVENTORY_ANNOTATION)


def test_node_inventory_is_none_without_the_annotation_and_cached_by_text() -> None:
    assert node_inventory(None) is None
    assert node_inventory({"other": "x"}) is None
    assert "expected a string" in node_inventory({dev.INVENTORY_ANNOTATION: 5}).error  # type: ignore[union-attr]
    text = inventory(gpu("GPU-0"))
    first = node_inventory({dev.INVENTORY_ANNOTATION: text})
    assert first is not None and first.devices[0].id == "GPU-0"
    assert node_inventory({dev.INVENTORY_ANNOTATION: text}) is first


# ---- requests -----------------------------------------------------------------------------


def _request(*containers: dict, annotations: dict | None = None) -> DeviceRequest | None:
    return device_request({"containers": list(containers)}, annotations or {})


def _container(name: str = "main", **limits: int | None) -> dict:
    return {"name": name, "resources": {"limits": gpu_limits(**limits)}}


def test_requests_per_container_with_the_documented_defaults() -> None:
    request = _request(_container("whole", gpus=2), _container("share", memory=4096),
                       _container("compute", memory=2048, cores=30), _container("cores-only", cores=20),
                       {"name": "cpu", "resources": {"requests": {"cpu": "1"}}})
    assert request is not None
    assert request.containers == (
        ContainerRequest("whole", 2, None, None),  # whole devices: all memory, all cores
        ContainerRequest("share", 1, 4096, 0),  # a memory share alone reserves no compute
        ContainerRequest("compute", 1, 2048, 30),
        ContainerRequest("cores-only", 1, None, 20),  # cores alone: all of the memory
    )


def test_requests_read_from_requests_too_and_sidecars_count() -> None:
    spec = {"containers": [{"name": "app", "resources": {"requests": {dev.GPU_MEMORY: "1024"}}}],
            "initContainers": [{"name": "side", "restartPolicy": "Always",
                                "resources": {"limits": gpu_limits(memory=512)}}]}
    request = device_request(spec, {})
    assert request is not None
    assert [c.container for c in request.containers] == ["side", "app"]


def test_a_pod_without_device_resources_asks_for_nothing() -> None:
    assert _request({"name": "c", "resources": {"limits": {"cpu": "1"}}}) is None
    assert _request(_container(gpus=0)) is None


@pytest.mark.parametrize(("container", "message"), [
    (_container(gpus=0, memory=1024), "gpu must be from 1 to 256"),
    (_container(cores=101), "from 0 to 100, not 101"),
    (_container(memory=8 * 2**30), "is in MiB per device"),
    ({"name": "c", "resources": {"limits": {dev.GPU: "lots"}}}, "spec.containers[0].resources.limits"),
])
def test_impossible_requests_are_invalid(container: dict, message: str) -> None:
    with pytest.raises(InvalidObject, match=message.replace("[", r"\[").replace("]", r"\]")):
        _request(container)


def test_plain_init_containers_may_not_ask_for_devices() -> None:
    spec = {"containers": [{"name": "c"}], "initContainers": [_container("init", gpus=1)]}
    with pytest.raises(InvalidObject, match="init containers are not supported"):
        device_request(spec, {})


def test_type_rules_are_case_insensitive_substrings() -> None:
    request = _request(_container(gpus=1), annotations={dev.TYPE_ANNOTATION: "A100, h100,",
                                                         dev.AVOID_TYPE_ANNOTATION: "PCIe"})
    assert request is not None and request.types == ("a100", "h100") and request.avoid == ("pcie",)
    make = dev.Device
    assert request.accepts(make("a", "NVIDIA-A100-SXM4-40GB", 1, 100))
    assert request.accepts(make("b", "NVIDIA-H100-80GB", 1, 100))
    assert not request.accepts(make("c", "NVIDIA-A100-PCIE-40GB", 1, 100))
    assert not request.accepts(make("d", "Tesla-T4", 1, 100))


# ---- assignments --------------------------------------------------------------------------


def test_assignment_round_trips_and_sums_per_device() -> None:
    assignment = Assignment("gpu-1", (("a", (("GPU-0", 1024, 10),)), ("b", (("GPU-0", 2048, 20), ("GPU-1", 512, 0)))))
    parsed = parse_assignment(assignment.to_annotation())
    assert parsed == assignment
    assert sorted(parsed.shares()) == [("GPU-0", 3072, 30), ("GPU-1", 512, 0)]


@pytest.mark.parametrize("text", [5, "nope", "[]", '{"node": "n"}', '{"node": "n", "containers": {"c": {}}}',
                                  '{"node": "n", "containers": {"c": [{"id": ""}]}}',
                                  '{"node": "n", "containers": {"c": [{"id": "a", "memory": -1, "cores": 0}]}}'])
def test_bad_assignments_are_refused(text: object) -> None:
    with pytest.raises(InvalidObject, match="gpu-assignment"):
        parse_assignment(text)


def test_bound_pod_records_hold_their_assignment_on_their_node_only() -> None:
    bound = record_from_dict(gpu_pod_dict("p", memory=1024, node="gpu-1",
                                          assignment={"main": [("GPU-0", 1024, 0)]}))
    assert bound.devices == (("GPU-0", 1024, 0),)
    copied = gpu_pod_dict("q", memory=1024, node="gpu-2")
    copied["metadata"]["annotations"][dev.ASSIGNMENT_ANNOTATION] = assignment_text("gpu-1", {"main": [("GPU-0", 1, 0)]})
    assert record_from_dict(copied).devices is None  # made for another node: holds nothing here
    assert record_from_dict(gpu_pod_dict("r", memory=1024)).devices is None  # pending


def test_an_unreadable_assignment_keeps_the_pod_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    raw = gpu_pod_dict("p", memory=1024, node="gpu-1")
    raw["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}
    raw["metadata"]["annotations"][dev.ASSIGNMENT_ANNOTATION] = "{broken"
    record = record_from_dict(raw)
    assert record.devices is None and record.requests["cpu"] == 1000
    assert "ignoring its device assignment" in caplog.text


# ---- choosing -----------------------------------------------------------------------------

T4 = [dev.Device(f"GPU-{i}", "Tesla-T4", 16000, 100, index=i) for i in range(3)]


def _one(count: int = 1, memory: int | None = None, cores: int | None = 0, **rules: tuple[str, ...]) -> DeviceRequest:
    if memory is None:
        cores = None
    return DeviceRequest((ContainerRequest("main", count, memory, cores),), **rules)


def test_binpack_takes_the_fullest_device_that_fits_and_spread_the_emptiest() -> None:
    use = {"GPU-0": Use(4000, 0, 1), "GPU-1": Use(12000, 0, 1)}
    assert choose(T4, use, _one(memory=3000), dev.BINPACK) == (("main", (("GPU-1", 3000, 0),)),)
    assert choose(T4, use, _one(memory=5000), dev.BINPACK) == (("main", (("GPU-0", 5000, 0),)),)
    assert choose(T4, use, _one(memory=3000), dev.SPREAD) == (("main", (("GPU-2", 3000, 0),)),)


def test_ties_go_to_the_first_listed_device() -> None:
    assert choose(T4, {}, _one(count=2, memory=1000)) == (("main", (("GPU-0", 1000, 0), ("GPU-1", 1000, 0))),)


def test_whole_device_requests_need_an_untouched_device_and_take_all_of_it() -> None:
    use = {"GPU-0": Use(1, 0, 1), "GPU-2": Use(0, 10, 1)}
    assert choose(T4, use, _one()) == (("main", (("GPU-1", 16000, 100),)),)


def test_containers_of_one_pod_see_each_others_shares() -> None:
    request = DeviceRequest((ContainerRequest("a", 1, 10000, 0), ContainerRequest("b", 1, 10000, 0)))
    chosen = choose(T4[:2], {}, request)
    assert chosen == (("a", (("GPU-0", 10000, 0),)), ("b", (("GPU-1", 10000, 0),)))
    assert isinstance(choose(T4[:1], {}, request), Shortfall)


@pytest.mark.parametrize(("devices", "use", "request_", "reasons", "final"), [
    ([], {}, _one(memory=1), (REASON_NO_DEVICES,), True),
    (T4, {}, _one(memory=1, types=("a100",)), (REASON_TYPE,), True),
    (T4, {}, _one(count=3, memory=1, avoid=("t4",)), (REASON_TYPE,), True),
    ([dev.Device("x", "T4", 100, 100, healthy=False)], {}, _one(memory=1), (REASON_UNHEALTHY,), True),
    (T4, {}, _one(memory=16001), (REASON_TOO_SMALL,), True),
    (T4, {}, _one(count=4, memory=1), (REASON_TOO_FEW,), True),
    (T4, {d.id: Use(16000, 100, 1) for d in T4}, _one(count=4, memory=1), (REASON_TOO_FEW,), True),
])
def test_shortfalls_name_what_was_missing(devices: list, use: dict, request_: DeviceRequest, reasons: tuple,
                                          final: bool) -> None:
    result = choose(devices, use, request_)
    assert isinstance(result, Shortfall)
    assert (result.reasons, result.final) == (reasons, final)


def test_taken_shares_are_unschedulable_and_the_detail_lists_each_device() -> None:
    use = {d.id: Use(15000, 90, 2) for d in T4}
    memory = choose(T4, use, _one(memory=2000))
    assert isinstance(memory, Shortfall) and memory.reasons == (REASON_MEMORY,) and not memory.final
    both = choose(T4, use, _one(memory=2000, cores=20))
    assert isinstance(both, Shortfall) and both.reasons == (REASON_MEMORY, REASON_CORES)
    cores = choose(T4, use, _one(memory=500, cores=20))
    assert isinstance(cores, Shortfall) and cores.reasons == (REASON_CORES,)
    assert "0 GPU(s) have room" in cores.detail
    assert "GPU-2 (Tesla-T4) 1000/16000 MiB, 10/100% cores free, 2 pod(s)" in cores.detail


def test_shortage_and_utilisation() -> None:
    capacity = {"GPU-0": (16000, 100)}
    assert shortage(capacity, {"GPU-0": Use(8000, 50, 1)}, [("GPU-0", 8000, 50)]) == ""
    assert "GPU-0" in shortage(capacity, {"GPU-0": Use(8001, 0, 1)}, [("GPU-0", 8000, 0)])
    assert shortage(capacity, {}, [("GPU-9", 1, 0)]) != ""  # a device the capacity does not know
    use = {"GPU-0": Use(16000, 100, 1), "GPU-1": Use(20000, 0, 1)}  # more than it has counts as full
    assert utilisation(T4, use) == (pytest.approx(1 / 2), 0.0)  # (2/3 memory + 1/3 cores) / 2
    assert utilisation(T4, use, {"GPU-0": (0, 0)}) == (pytest.approx(1 / 2), 1.0)
    assert utilisation(T4, use, {"GPU-2": (8000, 50)}) == (pytest.approx((40 / 48 + 150 / 300) / 2), 0.5)
    assert utilisation([], use) == (0.0, 0.0)


# ---- anything a node or a pod may carry -----------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=True)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)
DEVICE_LIKE = st.fixed_dictionaries({"id": JSON, "memory": JSON}, optional={"type": JSON, "cores": JSON,
                                                                            "healthy": JSON})


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(JSON, st.fixed_dictionaries({"devices": st.lists(DEVICE_LIKE, max_size=4)})))
def test_no_inventory_annotation_can_break_the_parser(doc: object) -> None:
    parsed = parse_inventory(json.dumps(doc))
    assert parsed.error or all(isinstance(d.memory, int) and 1 <= d.cores <= 100 for d in parsed.devices)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({}, optional={"name": JSON, "restartPolicy": JSON, "resources": st.one_of(
    JSON, st.fixed_dictionaries({}, optional={"limits": st.dictionaries(st.sampled_from(dev.RESOURCES), JSON),
                                              "requests": st.dictionaries(st.sampled_from(dev.RESOURCES), JSON)}))}),
    max_size=3), JSON)
def test_pod_requests_are_read_or_refused_with_a_reason(containers: list, annotations: object) -> None:
    try:
        request = device_request({"containers": containers, "initContainers": containers}, annotations
                                 if isinstance(annotations, dict) else {})
    except InvalidObject as exc:
        assert str(exc)
        return
    assert request is None or all(c.count >= 1 for c in request.containers)


@settings(max_examples=300)
@given(JSON)
def test_no_assignment_annotation_can_break_the_parser(doc: object) -> None:
    try:
        parse_assignment(json.dumps(doc))
    except InvalidObject:
        pass
