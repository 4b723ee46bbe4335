"""resource.k8s.io/v1 as kube-apiserver v1.36 serves it: defaults, status subresource, validation.

Each test passes on the fake and on a real kube-apiserver (envtest), which is how the fake's
rules in tests/fakeapi/dra.py are kept honest.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.fakeapi import KubeApiError
from tests.fakeapi.patches import MERGE_PATCH

API = "/apis/resource.k8s.io/v1"
CLASSES = f"{API}/deviceclasses"
SLICES = f"{API}/resourceslices"
CLAIMS = f"{API}/namespaces/default/resourceclaims"
TEMPLATES = f"{API}/namespaces/default/resourceclaimtemplates"
DRIVER = "gpu.example.com"


@pytest.fixture(autouse=True)
def _no_dra_objects(kube) -> None:
    """The server's reset does not know these kinds on a real server: purge them here."""
    for collection in (CLAIMS, TEMPLATES, SLICES, CLASSES):
        kube.purge(collection)


def causes(err: KubeApiError) -> set[tuple[str, str]]:
    return {(c["field"], c["reason"]) for c in (err.status.get("details") or {}).get("causes") or []}


def refused(kube, method: str, path: str, body: dict[str, Any], content_type: str = "application/json") -> KubeApiError:
    with pytest.raises(KubeApiError) as err:
        kube.call(method, path, body, content_type=content_type)
    assert err.value.code == 422, err.value.status
    return err.value


def claim(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    reqs = list(requests) or [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": reqs}}}


def resource_slice(name: str, node: str | None = "n1", devices: int = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": DRIVER, "pool": {"name": node or "pool", "resourceSliceCount": 1},
                            "devices": [{"name": f"gpu-{i}"} for i in range(devices)], **spec}
    if node is not None:
        body["nodeName"] = node
    return {"metadata": {"name": name}, "spec": body}


def allocation(request: str = "gpu", device: str = "gpu-0") -> dict[str, Any]:
    return {"devices": {"results": [{"request": request, "driver": DRIVER, "pool": "n1", "device": device}]}}


def consumer(name: str, uid: str | None = None) -> dict[str, Any]:
    return {"resource": "pods", "name": name, "uid": uid or str(uuid.uuid4())}


def write_status(kube, name: str, status: dict[str, Any]) -> dict[str, Any]:
    current = kube.call("GET", f"{CLAIMS}/{name}")
    current["status"] = status
    return kube.call("PUT", f"{CLAIMS}/{name}/status", current)


# -- discovery ------------------------------------------------------------------------------------


def test_discovery_lists_the_group_and_its_four_kinds(kube) -> None:
    groups = {g["name"]: g for g in kube.call("GET", "/apis")["groups"]}
    assert groups["resource.k8s.io"]["preferredVersion"]["version"] == "v1"
    listed = {r["name"]: r for r in kube.call("GET", API)["resources"]}
    assert {n: r["namespaced"] for n, r in listed.items()
            if n in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")} == {
        "deviceclasses": False, "resourceslices": False, "resourceclaims": True, "resourceclaimtemplates": True}
    assert listed["resourceclaims/status"]["verbs"] == ["get", "patch", "update"]
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(listed["resourceslices"]["verbs"])


def test_the_group_can_be_switched_off(tmp_path) -> None:
    from tests.fakeapi.fixtures import running_fake

    with running_fake(tmp_path, dra_api=False) as handle:
        kube = handle.client
        assert "resource.k8s.io" not in {g["name"] for g in kube.call("GET", "/apis")["groups"]}
        for path in (API, CLAIMS, f"{API}/resourceslices"):
            reply = kube.request("GET", path)
            assert reply.status_code == 404 and reply.text == "404 page not found\n"
        assert kube.request("POST", CLAIMS, claim("c")).status_code == 404
        handle.fake.configure(dra_api=True)
        assert kube.call("POST", CLAIMS, claim("c"))["metadata"]["name"] == "c"


# -- create, defaults, read -----------------------------------------------------------------------


def test_claim_defaults_and_empty_status(kube) -> None:
    body = claim("c", {"name": "one", "exactly": {"deviceClassName": "gpu"}},
                 {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
                 {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "gpu",
                                                     "tolerations": [{"key": "k", "value": "v"}]}]})
    body["status"] = {"allocation": allocation("one")}
    body["spec"]["unknown"] = True
    created = kube.call("POST", CLAIMS, body)
    one, every, alt = created["spec"]["devices"]["requests"]
    assert one["exactly"] == {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    assert every["exactly"] == {"deviceClassName": "gpu", "allocationMode": "All"}
    assert alt["firstAvailable"][0] == {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount",
                                        "count": 1, "tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]}
    assert created["spec"] == {"devices": {"requests": [one, every, alt]}}  # the unknown field is dropped
    assert created["status"] == {}  # PrepareForCreate empties the status
    assert "generation" not in created["metadata"]
    assert kube.call("GET", f"{CLAIMS}/c") == created


def test_a_claim_without_requests_reads_back_null_requests(kube) -> None:
    created = kube.call("POST", CLAIMS, {"metadata": {"name": "empty"}, "spec": {}})
    assert created["spec"] == {"devices": {"requests": None}}


def test_class_slice_and_template_create_get_list(kube) -> None:
    cls = kube.call("POST", CLASSES, {"metadata": {"name": "gpu"}, "spec": {
        "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    assert cls["metadata"]["generation"] == 1
    assert cls["spec"] == {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    bare = kube.call("POST", CLASSES, {"metadata": {"name": "bare"}})
    assert bare["spec"] == {}
    sl = kube.call("POST", SLICES, resource_slice("s1"))
    assert sl["metadata"]["generation"] == 1
    assert sl["spec"] == {"driver": DRIVER, "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
                          "nodeName": "n1", "devices": [{"name": "gpu-0"}]}
    template = kube.call("POST", TEMPLATES, {"metadata": {"name": "t"}, "spec": {"spec": claim("x")["spec"]}})
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    assert "generation" not in template["metadata"]
    assert [i["metadata"]["name"] for i in kube.call("GET", CLASSES)["items"]] == ["bare", "gpu"]
    listed = kube.call("GET", SLICES)
    assert listed["kind"] == "ResourceSliceList" and listed["items"][0]["spec"] == sl["spec"]
    assert kube.call("GET", f"{API}/resourceclaimtemplates")["items"][0]["metadata"]["namespace"] == "default"


def test_slice_devices_keep_attributes_capacity_and_taints(kube) -> None:
    body = resource_slice("s1")
    body["spec"]["devices"] = [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "cores": {"int": 8}},
                                "capacity": {"memory": {"value": "80Gi"}, "bandwidth": {"value": "1024Mi"},
                                             "share": {"value": "1000m"}},
                                "taints": [{"key": "broken", "effect": "NoSchedule"}]}]
    device = kube.call("POST", SLICES, body)["spec"]["devices"][0]
    assert device["attributes"] == {"cores": {"int": 8}, "model": {"string": "a100"}}
    # Quantities come back in canonical form.
    assert device["capacity"] == {"bandwidth": {"value": "1Gi"}, "memory": {"value": "80Gi"}, "share": {"value": "1"}}
    taint = device["taints"][0]
    assert (taint["key"], taint["effect"]) == ("broken", "NoSchedule") and taint["timeAdded"]  # defaulted to now


def test_slice_generation_follows_spec_changes(kube) -> None:
    kube.call("POST", SLICES, resource_slice("s1"))
    labelled = kube.call("PATCH", f"{SLICES}/s1", {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE_PATCH)
    assert labelled["metadata"]["generation"] == 1
    changed = kube.call("PATCH", f"{SLICES}/s1", {"spec": {"pool": {"generation": 1}}}, content_type=MERGE_PATCH)
    assert changed["metadata"]["generation"] == 2 and changed["spec"]["pool"]["generation"] == 1


# -- field selectors and watch --------------------------------------------------------------------


def test_slices_select_by_node_name_and_driver(kube) -> None:
    kube.call("POST", SLICES, resource_slice("on-n1", "n1"))
    kube.call("POST", SLICES, resource_slice("on-n2", "n2"))
    kube.call("POST", SLICES, resource_slice("everywhere", None, allNodes=True))
    other = resource_slice("other-driver", "n1")
    other["spec"]["driver"] = "nic.example.com"
    kube.call("POST", SLICES, other)

    def names(selector: str) -> list[str]:
        return sorted(i["metadata"]["name"] for i in kube.call("GET", SLICES, params={"fieldSelector": selector})["items"])

    assert names("spec.nodeName=n1") == ["on-n1", "other-driver"]
    assert names(f"spec.nodeName=n1,spec.driver={DRIVER}") == ["on-n1"]
    assert names("spec.nodeName=") == ["everywhere"]
    assert names("spec.driver!=gpu.example.com") == ["other-driver"]
    with pytest.raises(KubeApiError) as err:
        kube.call("GET", SLICES, params={"fieldSelector": "spec.pool.name=n1"})
    assert err.value.code == 400


def _watch(kube, path: str, rv: str, **params: str) -> list[dict[str, Any]]:
    reply = kube.request("GET", path, params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "1", **params},
                         timeout=15)
    assert reply.status_code == 200
    return [json.loads(line) for line in reply.text.splitlines() if line.strip()]


def test_watch_claims_and_node_selected_slices(kube) -> None:
    rv = kube.call("GET", CLAIMS)["metadata"]["resourceVersion"]
    kube.call("POST", CLAIMS, claim("c"))
    write_status(kube, "c", {"allocation": allocation()})
    kube.call("DELETE", f"{CLAIMS}/c")
    events = _watch(kube, CLAIMS, rv)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert events[0]["object"]["kind"] == "ResourceClaim"

    rv = kube.call("GET", SLICES)["metadata"]["resourceVersion"]
    kube.call("POST", SLICES, resource_slice("on-n1", "n1"))
    kube.call("POST", SLICES, resource_slice("on-n2", "n2"))
    events = _watch(kube, SLICES, rv, fieldSelector="spec.nodeName=n2")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "on-n2")]


# -- the claim's status subresource ---------------------------------------------------------------


def test_a_plain_update_keeps_the_status_and_a_status_update_keeps_the_rest(kube) -> None:
    kube.call("POST", CLAIMS, claim("c"))
    written = kube.call("PATCH", f"{CLAIMS}/c", {"metadata": {"labels": {"a": "b"}},
                                                 "status": {"allocation": allocation()}}, content_type=MERGE_PATCH)
    assert written["status"] == {} and written["metadata"]["labels"] == {"a": "b"}
    allocated = kube.call("PATCH", f"{CLAIMS}/c/status", {
        "metadata": {"labels": {"a": "changed"}, "finalizers": ["example.com/x"]},
        "spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": allocation()}}, content_type=MERGE_PATCH)
    assert allocated["status"]["allocation"] == {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}}
    assert allocated["spec"]["devices"]["requests"][0]["name"] == "gpu"  # spec untouched
    assert allocated["metadata"]["labels"] == {"a": "b"}  # metadata untouched (ResetObjectMetaForStatus)
    assert "finalizers" not in allocated["metadata"]


def test_the_spec_is_immutable(kube) -> None:
    kube.call("POST", CLAIMS, claim("c"))
    change = {"spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "gpu"}}]}}}
    err = refused(kube, "PATCH", f"{CLAIMS}/c", change, MERGE_PATCH)
    assert causes(err) == {("spec", "FieldValueInvalid")}
    # The new value, printed as the internal Go type would be marshalled.
    assert err.status["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: spec: Invalid value: {"Devices":{"Requests":[{"Name":"other",'
        '"Exactly":{"DeviceClassName":"gpu","Selectors":null,"AllocationMode":"ExactCount","Count":1,'
        '"AdminAccess":null,"Tolerations":null,"Capacity":null},"FirstAvailable":null}],"Constraints":null,'
        '"Config":null}}: field is immutable')
    kube.call("POST", TEMPLATES, {"metadata": {"name": "t"}, "spec": {"spec": claim("x")["spec"]}})
    err = refused(kube, "PATCH", f"{TEMPLATES}/t", {"spec": change}, MERGE_PATCH)
    assert causes(err) == {("spec", "FieldValueInvalid")}


def test_the_allocation_is_set_once(kube) -> None:
    kube.call("POST", CLAIMS, claim("c"))
    write_status(kube, "c", {"allocation": allocation()})
    err = refused(kube, "PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": allocation(device="gpu-1")}},
                  MERGE_PATCH)
    assert causes(err) == {("status.allocation", "FieldValueInvalid")}
    assert err.status["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: status.allocation: Invalid value: {"Devices":{"Results":['
        '{"Request":"gpu","Driver":"gpu.example.com","Pool":"n1","Device":"gpu-1","AdminAccess":null,'
        '"Tolerations":null,"BindingConditions":null,"BindingFailureConditions":null,"ShareID":null,'
        '"ConsumedCapacity":null}],"Config":null},"NodeSelector":null,"AllocationTimestamp":null}: field is immutable')
    cleared = kube.call("PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": None}}, content_type=MERGE_PATCH)
    assert cleared["status"] == {}


def test_an_allocation_names_a_request_of_the_claim(kube) -> None:
    kube.call("POST", CLAIMS, claim("c"))
    err = refused(kube, "PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": allocation("nope")}}, MERGE_PATCH)
    assert causes(err) == {("status.allocation.devices.results[0].request", "FieldValueInvalid")}
    assert ("must be the name of a request in the claim or the name of a request and a subrequest "
            "separated by '/'") in err.status["message"]


def test_reserved_for_needs_an_allocation_and_unique_uids(kube) -> None:
    kube.call("POST", CLAIMS, claim("c"))
    err = refused(kube, "PATCH", f"{CLAIMS}/c/status", {"status": {"reservedFor": [consumer("p")]}}, MERGE_PATCH)
    assert causes(err) == {("status.reservedFor", "FieldValueForbidden")}
    assert "status.reservedFor: Forbidden: may not be specified when `allocated` is not set" in err.status["message"]
    uid = str(uuid.uuid4())
    err = refused(kube, "PATCH", f"{CLAIMS}/c/status", {"status": {
        "allocation": allocation(), "reservedFor": [consumer("p", uid), consumer("q", uid)]}}, MERGE_PATCH)
    assert causes(err) == {("status.reservedFor[1]", "FieldValueDuplicate")}
    assert f'status.reservedFor[1]: Duplicate value: "{uid}"' in err.status["message"]
    reserved = write_status(kube, "c", {"allocation": allocation(), "reservedFor": [consumer("p", uid)]})
    assert reserved["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": uid}]
    err = refused(kube, "PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": None}}, MERGE_PATCH)
    assert causes(err) == {("status.reservedFor", "FieldValueForbidden")}
    released = kube.call("PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": None, "reservedFor": None}},
                         content_type=MERGE_PATCH)
    assert released["status"] == {}


def test_reserved_for_holds_at_most_256_consumers(kube) -> None:
    kube.call("POST", CLAIMS, claim("c"))
    full = write_status(kube, "c", {"allocation": allocation(),
                                    "reservedFor": [consumer(f"p{i}") for i in range(256)]})
    assert len(full["status"]["reservedFor"]) == 256
    full["status"]["reservedFor"].append(consumer("one-more"))
    err = refused(kube, "PUT", f"{CLAIMS}/c/status", full)
    assert causes(err) == {("status.reservedFor", "FieldValueTooMany")}
    assert "status.reservedFor: Too many: 257: must have at most 256 items" in err.status["message"]


# -- finalizers and deletion ----------------------------------------------------------------------


def test_a_claim_with_a_finalizer_stays_until_it_is_released(kube) -> None:
    body = claim("c")
    body["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    kube.call("POST", CLAIMS, body)
    reserved = write_status(kube, "c", {"allocation": allocation(), "reservedFor": [consumer("p")]})
    deleting = kube.call("DELETE", f"{CLAIMS}/c")
    assert deleting["metadata"]["deletionTimestamp"]
    assert kube.call("GET", f"{CLAIMS}/c")["metadata"]["deletionTimestamp"]
    # Being deleted: consumers may go, none may come.
    err = refused(kube, "PATCH", f"{CLAIMS}/c/status", {"status": {
        "reservedFor": [*reserved["status"]["reservedFor"], consumer("q")]}}, MERGE_PATCH)
    assert "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set" in (
        err.status["message"])
    kube.call("PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": None, "reservedFor": None}},
              content_type=MERGE_PATCH)
    kube.call("PATCH", f"{CLAIMS}/c", {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    with pytest.raises(KubeApiError) as gone:
        kube.call("GET", f"{CLAIMS}/c")
    assert gone.value.code == 404


def test_deleting_answers_the_deleted_object(kube) -> None:
    created = kube.call("POST", SLICES, resource_slice("s1"))
    gone = kube.call("DELETE", f"{SLICES}/s1")
    assert gone["kind"] == "ResourceSlice" and gone["metadata"]["uid"] == created["metadata"]["uid"]
    kube.call("POST", CLASSES, {"metadata": {"name": "gpu"}})
    assert kube.call("DELETE", f"{CLASSES}/gpu")["kind"] == "DeviceClass"


# -- validation -----------------------------------------------------------------------------------


def test_request_names_and_kinds(kube) -> None:
    err = refused(kube, "POST", CLAIMS, claim(
        "bad",
        {"name": "Not_A_Label", "exactly": {"deviceClassName": "gpu"}},
        {"name": "neither"},
        {"name": "both", "exactly": {"deviceClassName": "gpu"},
         "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]},
        {"name": "neither", "exactly": {"deviceClassName": "gpu"}},
    ))
    assert causes(err) == {
        ("spec.devices.requests[0].name", "FieldValueInvalid"),
        ("spec.devices.requests[1]", "FieldValueRequired"),
        ("spec.devices.requests[2]", "FieldValueInvalid"),
        ("spec.devices.requests[3]", "FieldValueDuplicate"),
    }
    message = err.status["message"]
    assert "spec.devices.requests[1]: Required value: exactly one of `exactly` or `firstAvailable` is required" in message
    assert ("spec.devices.requests[2]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is "
            "required, but multiple fields are set") in message
    assert 'spec.devices.requests[3]: Duplicate value: "neither"' in message


def test_allocation_modes_and_counts(kube) -> None:
    err = refused(kube, "POST", CLAIMS, claim(
        "bad",
        {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "All", "count": 2}},
        {"name": "b", "exactly": {"deviceClassName": "gpu", "count": -1}},
        {"name": "c", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}},
        {"name": "d", "exactly": {}},
    ))
    assert causes(err) == {
        ("spec.devices.requests[0].exactly.count", "FieldValueInvalid"),
        ("spec.devices.requests[1].exactly.count", "FieldValueInvalid"),
        ("spec.devices.requests[2].exactly.allocationMode", "FieldValueNotSupported"),
        ("spec.devices.requests[3].exactly.deviceClassName", "FieldValueRequired"),
    }
    message = err.status["message"]
    assert ("spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode "
            "is 'All'") in message
    assert "spec.devices.requests[1].exactly.count: Invalid value: -1: must be greater than zero" in message
    assert ('spec.devices.requests[2].exactly.allocationMode: Unsupported value: "Some": supported values: '
            '"All", "ExactCount"') in message


def test_slice_pool_and_node_selection(kube) -> None:
    body = resource_slice("bad", "n1", allNodes=True)
    body["spec"]["pool"] = {"name": "", "resourceSliceCount": 0}
    err = refused(kube, "POST", SLICES, body)
    assert causes(err) == {("spec.pool.name", "FieldValueRequired"),
                           ("spec.pool.resourceSliceCount", "FieldValueInvalid"),
                           ("spec", "FieldValueInvalid")}
    message = err.status["message"]
    assert "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero" in message
    assert ('spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, '
            '`allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set') in message
    err = refused(kube, "POST", SLICES, resource_slice("none", None))
    assert causes(err) == {("spec", "FieldValueRequired")}
    assert ("spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required") in err.status["message"]


def test_slice_node_selector_has_exactly_one_term(kube) -> None:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    ok = kube.call("POST", SLICES, resource_slice("one", None, nodeSelector={"nodeSelectorTerms": [term]}))
    assert ok["spec"]["nodeSelector"] == {"nodeSelectorTerms": [term]}
    err = refused(kube, "POST", SLICES, resource_slice("two", None, nodeSelector={"nodeSelectorTerms": [term, term]}))
    assert causes(err) == {("spec.nodeSelector.nodeSelectorTerms", "FieldValueInvalid")}
    assert ('spec.nodeSelector.nodeSelectorTerms: Invalid value: [{"MatchExpressions":[{"Key":"zone","Operator":"In",'
            '"Values":["a"]}],"MatchFields":null},{"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["a"]}],'
            '"MatchFields":null}]: must have exactly one node selector term') in err.status["message"]


def test_slice_devices_unique_and_at_most_128(kube) -> None:
    body = resource_slice("dup", devices=2)
    body["spec"]["devices"][1]["name"] = "gpu-0"
    err = refused(kube, "POST", SLICES, body)
    assert causes(err) == {("spec.devices[1]", "FieldValueDuplicate")}
    assert 'spec.devices[1]: Duplicate value: "gpu-0"' in err.status["message"]
    assert len(kube.call("POST", SLICES, resource_slice("full", devices=128))["spec"]["devices"]) == 128
    err = refused(kube, "POST", SLICES, resource_slice("over", devices=129))
    assert causes(err) == {("spec.devices", "FieldValueTooMany")}
    assert "spec.devices: Too many: 129: must have at most 128 items" in err.status["message"]


def test_slice_driver_pool_and_node_are_immutable(kube) -> None:
    kube.call("POST", SLICES, resource_slice("s1"))
    err = refused(kube, "PATCH", f"{SLICES}/s1", {"spec": {"driver": "nic.example.com", "nodeName": "n2"}},
                  MERGE_PATCH)
    assert causes(err) == {("spec.driver", "FieldValueInvalid"), ("spec.nodeName", "FieldValueInvalid")}
    assert 'spec.driver: Invalid value: "nic.example.com": field is immutable' in err.status["message"]
