"""A raw HTTP watch reader for tests: what arrives on the wire, line by line, in a thread."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests


class RawWatch:
    """GET a watch URL with ``requests`` and collect decoded events until the stream ends."""

    def __init__(
        self,
        base_url: str,
        path: str,
        params: Mapping[str, Any],
        token: str | None = None,
        verify: bool | str = True,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.events: list[dict[str, Any]] = []
        self.raw_lines: list[bytes] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.response = requests.get(
            base_url + path,
            params={**params, "watch": "true"},
            headers=headers,
            stream=True,
            timeout=(5, 30),
            verify=verify,
        )
        self.status_code = self.response.status_code
        self.headers = self.response.headers
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines():
                if line:
                    self.raw_lines.append(line)
                    self.events.append(json.loads(line))
        except BaseException as exc:  # noqa: BLE001 - reported to the test through .error
            self.error = exc
        finally:
            self.done.set()

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 5.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.events):
                return self.events
            if self.done.is_set():
                break
            time.sleep(0.01)
        assert predicate(self.events), f"watch events so far: {self.summary()}"
        return self.events

    def wait_closed(self, timeout: float = 5.0) -> None:
        assert self.done.wait(timeout), "the watch stream did not end"

    def summary(self) -> list[tuple[str, str | None]]:
        return [(e["type"], e["object"].get("metadata", {}).get("name")) for e in self.events]

    def close(self) -> None:
        """Hang up. Closing the response alone does not wake a thread blocked in recv(), so the
        socket is shut down first (as kubernetes.watch.Watch.stop does)."""
        sock = getattr(getattr(self.response.raw, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.response.close()
        self._thread.join(timeout=2)


def types_and_names(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [
        (e["type"], e["object"].get("metadata", {}).get("name"))
        for e in events
        if e["type"] != "BOOKMARK"
    ]
