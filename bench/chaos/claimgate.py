"""A validating admission webhook in front of every write to ``resourceclaims/status``: the
chaos run's way to refuse, hold or time out the writes a scheduler makes while it allocates.

The fault proxy (proxy.py) passes TLS through and cannot tell one request from another; the
API server can. kube-apiserver calls this webhook (over HTTPS, a serving certificate from the
control plane's CA) for each UPDATE or PATCH of a claim's status in the chaos namespace, after
authentication and before anything is stored, with the claim before and after. Unarmed, it
allows at once. Armed:

* :meth:`ClaimGate.refuse` (``claim-write-refused``): the next N writes are answered ``409
  Conflict`` or ``500`` (the webhook's denial carries the code, which kube-apiserver passes on),
  or held past the writer's own read timeout (extender/kube/claim_binding.py, 15 s) and
  then allowed or refused as the seed says: an allowed one lands after its writer gave up,
  which is how a write "that failed" can still be there;
* :meth:`ClaimGate.kill_in_prebind` (``leader-sigkill-in-prebind``): the next write by which
  the standalone pool's scheduler allocates a claim or reserves it for a pod (a pod of that
  pool newly in ``reservedFor``) is caught. As the seed says, either the leader is SIGKILLed
  while that write waits for its answer, which is then a refusal (kube-apiserver has usually
  dropped it anyway, its client gone), or the write is let through and the leader killed as
  the answer goes back: the claim is allocated and reserved for a pod nobody binds, the
  window between PreBind's status write and the binding. No luck is needed to hit either.

``failurePolicy: Fail`` with ``timeoutSeconds: 20``: a write the webhook does not answer in
time is refused by kube-apiserver (500), never let through unseen.
"""

from __future__ import annotations

import base64
import json
import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

NAME = "chaos-claim-gate.chaos.example"
TIMEOUT_SECONDS = 20
HOLD_PAST_CLIENT = 17.0  # past the extender's 15 s read timeout, within the webhook's 20 s
MODES = ("conflict", "error", "timeout")


@dataclass
class Armed:
    """What the gate does to the next writes it sees."""

    mode: str  # conflict, error, timeout; or kill
    count: int
    land: bool = False  # after a hold: allow (True) or refuse
    on_match: Callable[[], str] = lambda: ""  # kill: the callback that kills the leader
    answered: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # per answer: what kube-apiserver got
    verdicts: list[str] = field(default_factory=list)  # answers decided, not yet sent
    done: threading.Event = field(default_factory=threading.Event)


def _reserved_pods(claim: dict[str, Any]) -> set[str]:
    return {str(r.get("name")) for r in (claim.get("status") or {}).get("reservedFor") or []
            if r.get("resource") == "pods"}


class ClaimGate:
    """The webhook server, and the ValidatingWebhookConfiguration that points kube-apiserver at it."""

    def __init__(self, serving: tuple[Path, Path], ca_file: Path, namespace: str, standalone_prefix: str) -> None:
        self.ca_file = ca_file
        self.namespace = namespace
        self.standalone_prefix = standalone_prefix
        self.seen = 0
        self.refused = 0
        self._armed: Armed | None = None
        self._lock = threading.Lock()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                review = json.loads(self.rfile.read(length) or b"{}")
                answer, armed = gate.review(review)
                body = json.dumps(answer).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    delivered = True
                except OSError:  # kube-apiserver gave up on the request (its client went away, or it timed out)
                    delivered = False
                if armed is not None:
                    gate.delivered(armed, delivered)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(serving[0]), str(serving[1]))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="chaos-claim-gate", daemon=True)

    def start(self) -> ClaimGate:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            armed, self._armed = self._armed, None
        if armed is not None:
            armed.done.set()
        self._server.shutdown()
        self._server.server_close()

    def configuration(self) -> dict[str, Any]:
        """The ValidatingWebhookConfiguration to create (once, before the schedulers start)."""
        bundle = base64.b64encode(self.ca_file.read_bytes()).decode()
        return {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": [{
                "name": NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": TIMEOUT_SECONDS,
                "clientConfig": {"url": f"https://127.0.0.1:{self.port}/claims", "caBundle": bundle},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["UPDATE"],
                           "resources": ["resourceclaims/status"], "scope": "Namespaced"}],
            }],
        }  # fmt: skip

    # ---- faults ----------------------------------------------------------------------------------

    def _arm(self, armed: Armed, timeout: float) -> Armed:
        with self._lock:
            self._armed = armed
        armed.done.wait(timeout)
        with self._lock:
            if self._armed is armed:
                self._armed = None
        return armed

    def refuse(self, rng: random.Random, timeout: float = 60.0) -> str:
        """Refuse (or hold) the next 1..3 writes; returns when they were answered, or after `timeout`."""
        mode, count = rng.choice(MODES), rng.randint(1, 3)
        armed = self._arm(Armed(mode, count, land=rng.random() < 0.5), timeout)
        held = f", then {'let through' if armed.land else 'refused'}" if mode == "timeout" else ""
        names = ", ".join(f"{name}: {outcome}" for name, outcome in zip(armed.answered, armed.outcomes, strict=False))
        return f"{mode}{held}: {len(armed.answered)} of {count} writes ({names or f'none came within {timeout:.0f} s'})"

    def kill_in_prebind(self, kill: Callable[[], str], rng: random.Random, timeout: float = 60.0) -> str:
        """Hold the standalone pool's next allocating write, kill the leader meanwhile, then let
        the write land or refuse it."""
        armed = self._arm(Armed("kill", 1, land=rng.random() < 0.5, on_match=kill), timeout)
        if not armed.answered:
            return f"no allocating write of the standalone pool within {timeout:.0f} s"
        armed.done.wait(5.0)  # the kill after a write let through comes with its answer
        return f"{armed.answered[0]}; {armed.outcomes[0] if armed.outcomes else 'no answer yet'}"

    # ---- the webhook -----------------------------------------------------------------------------

    def _allocating(self, request: dict[str, Any]) -> bool:
        """Is this write the standalone scheduler allocating or reserving a claim for its pod?"""
        new, old = request.get("object") or {}, request.get("oldObject") or {}
        added = _reserved_pods(new) - _reserved_pods(old)
        return bool((new.get("status") or {}).get("allocation")) and any(
            p.startswith(self.standalone_prefix) for p in added)

    def delivered(self, armed: Armed, delivered: bool) -> None:
        """One armed answer went back to kube-apiserver (or could not: it had given up on it).
        A PreBind kill whose write is let through kills now: the write is being stored and
        answered, and the writer dies before (or just as) it sends the binding."""
        if armed.mode == "kill" and armed.land:
            killed = armed.on_match()
            armed.answered[-1] = f"{armed.answered[-1]} let through, then {killed}"
        with self._lock:
            verdict = armed.verdicts.pop(0) if armed.verdicts else "?"
            armed.outcomes.append(verdict if delivered else f"{verdict} (kube-apiserver had given up: not written)")
            if len(armed.outcomes) >= armed.count:
                armed.done.set()

    def review(self, review: dict[str, Any]) -> tuple[dict[str, Any], Armed | None]:
        """The answer to one AdmissionReview, and the armed fault that took it (None: allowed as usual)."""
        request = review.get("request") or {}
        uid = request.get("uid", "")
        self.seen += 1
        name = f"{request.get('namespace')}/{request.get('name')}"
        with self._lock:
            armed = self._armed
            take = armed is not None and len(armed.answered) < armed.count and (
                armed.mode != "kill" or self._allocating(request))
            if take:
                assert armed is not None
                armed.answered.append(name)  # taken under the lock: N writes, not more
        if not take or armed is None:
            return _answer(uid, True), None
        allowed, code, message = False, 0, ""
        if armed.mode == "conflict":
            code, message = 409, "chaos: the object has been modified; please apply your changes to the latest version"
        elif armed.mode == "error":
            code, message = 500, "chaos: etcdserver: request timed out"
        elif armed.mode == "timeout":
            time.sleep(HOLD_PAST_CLIENT)
            allowed, code, message = armed.land, 500, "chaos: held past the client's timeout, then refused"
        elif armed.land:  # kill right after the write is stored: between PreBind and the binding
            allowed = True
        else:  # kill while the write waits for its answer, then refuse it
            killed = armed.on_match()
            armed.answered[-1] = f"{name} held, {killed}"
            code, message = 500, "chaos: refused after its writer was killed"
        with self._lock:
            if not allowed:
                self.refused += 1
            armed.verdicts.append("let through" if allowed else f"refused {code}")
        return _answer(uid, allowed, code, message), armed


def _answer(uid: str, allowed: bool, code: int = 0, message: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": code, "message": message}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
