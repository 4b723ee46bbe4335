"""Every class of bad input gets a 4xx with {"Error": ...}; nothing is a 500 and nothing stored changes."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from extender.webhook.runtime import Runtime
from tests.helpers import wire_body


def state_fingerprint(runtime: Runtime) -> tuple:
    state = runtime.state
    return (
        tuple(sorted((i.name, tuple(sorted(i.requested.items())), i.pod_count) for i in state.all_node_infos())),
        tuple(sorted((k, state.pod(k).node_name) for k in [p for p in state._pods])),
    )


def assert_error(resp, status: int, *needles: str) -> None:
    assert resp.status_code == status, resp.data
    body = resp.get_json()
    assert set(body) == {"Error"}
    for needle in needles:
        assert needle in body["Error"], body["Error"]


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind", "preempt"])
def test_malformed_json(client: FlaskClient, runtime: Runtime, verb: str) -> None:
    before = state_fingerprint(runtime)
    resp = client.post(f"/{verb}", data=b'{"Pod": {', content_type="application/json")
    assert_error(resp, 400, "malformed JSON")
    assert state_fingerprint(runtime) == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type(client: FlaskClient, content_type: str | None) -> None:
    resp = client.post("/filter", data=b"{}", content_type=content_type)
    assert_error(resp, 415, "Content-Type must be application/json")


def test_missing_pod(client: FlaskClient) -> None:
    assert_error(client.post("/filter", json={"NodeNames": ["node-1"]}), 400, "Pod", "required")


def test_both_nodes_and_node_names(client: FlaskClient) -> None:
    body = wire_body("filter-request-nodecache-false.json")
    body["NodeNames"] = ["node-1"]
    assert_error(client.post("/filter", json=body), 400, "exactly one of Nodes and NodeNames", "both")


def test_neither_nodes_nor_node_names(client: FlaskClient) -> None:
    body = wire_body("filter-request.json")
    body["NodeNames"] = None
    assert_error(client.post("/prioritize", json=body), 400, "exactly one of Nodes and NodeNames", "neither")


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda b: b.update(NodeNames="node-1"), "NodeNames"),
        (lambda b: b.update(NodeNames=[1, 2]), "NodeNames"),
        (lambda b: b.update(Pod=[]), "Pod"),
        (lambda b: b["Pod"]["spec"].update(containers={}), "spec.containers"),
        (lambda b: b["Pod"]["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"), "cpu"),
        (lambda b: b["Pod"]["spec"].update(tolerations=[{"operator": "Sometimes"}]), "tolerations"),
        (lambda b: b["Pod"]["metadata"].update(name=7), "metadata.name"),
    ],
)
def test_wrong_types(client: FlaskClient, runtime: Runtime, mutate, needle: str) -> None:
    body = wire_body("filter-request.json")
    mutate(body)
    before = state_fingerprint(runtime)
    assert_error(client.post("/filter", json=body), 400, needle)
    assert state_fingerprint(runtime) == before


def test_nodelist_as_bare_array_is_refused(client: FlaskClient) -> None:
    body = wire_body("filter-request-nodecache-false.json")
    body["Nodes"] = body["Nodes"]["items"]
    assert_error(client.post("/filter", json=body), 400, "NodeList object")


def test_bind_wrong_types(client: FlaskClient, runtime: Runtime) -> None:
    before = state_fingerprint(runtime)
    assert_error(client.post("/bind", json={"PodName": 1, "PodNamespace": "default", "PodUID": "x", "Node": "n"}),
                 400, "PodName")
    assert_error(client.post("/bind", json={"PodName": "p"}), 400, "Node")
    assert state_fingerprint(runtime) == before


def test_unknown_verb(client: FlaskClient) -> None:
    assert_error(client.post("/schedule", json={}), 404, "unknown path")


@pytest.mark.parametrize("method", ["get", "put", "delete", "patch"])
def test_method_other_than_post(client: FlaskClient, method: str) -> None:
    assert_error(getattr(client, method)("/filter"), 405, "verbs take POST")


def test_body_over_size_limit(settings, runtime) -> None:
    from dataclasses import replace

    from extender.webhook import create_app

    small = create_app(replace(settings, max_body_bytes=4096), runtime=runtime).test_client()
    body = wire_body("filter-request-nodecache-false.json")  # ~7 KB
    assert_error(small.post("/filter", json=body), 413, "exceeds the limit of 4096 bytes")


def test_default_size_limit_fits_5000_full_nodes(settings) -> None:
    node = wire_body("filter-request-nodecache-false.json")["Nodes"]["items"][0]
    import orjson

    assert settings.max_body_bytes > 5000 * len(orjson.dumps(node)) * 4  # realistic nodes are ~8 KB


def test_scalar_and_array_bodies(client: FlaskClient) -> None:
    for body in (b"[]", b"1", b'"x"', b"null"):
        resp = client.post("/filter", data=body, content_type="application/json")
        assert resp.status_code == 400, body


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/version", "/openapi.json"])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_wrong_method_on_a_status_route_names_the_one_it_takes(client: FlaskClient, path: str,
                                                               method: str) -> None:
    resp = getattr(client, method)(path)
    assert_error(resp, 405, f"not allowed on {path}; it takes GET")
    assert "verbs" not in resp.get_json()["Error"]


def test_disabled_explain_says_how_to_enable_it(client: FlaskClient) -> None:
    resp = client.post("/explain", json=wire_body("filter-request.json"))
    assert_error(resp, 404, "/explain is off", "--enable-explain")
