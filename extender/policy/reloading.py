"""Reloading the policy file while serving, for ConfigMap-mounted policies.

A ConfigMap volume updates by swapping the `..data` symlink, so the file's path never
changes while what it resolves to does. `maybe_reload` therefore stats the resolved
file (inode, size, mtime) as a cheap "maybe changed" signal and then compares the
content's sha256, which is what decides. A bad new file never replaces a good policy:
the old engine keeps serving, the error is logged once per bad version, and the
outcome goes to `on_reload` ("success", "failure", "unchanged") so the caller can
count it in a metric without this module knowing about Prometheus. A new policy may
need what the old one did not (the webhook starts watching pods for it): preparers run
before it replaces the old one, which serves until they return.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from os import PathLike
from typing import Any

from extender.errors import PolicyError
from extender.policy.engine import Engine, Policy
from extender.policy.loading import MAX_POLICY_BYTES, load_policy
from extender.policy.registry import Registry

log = logging.getLogger(__name__)

SUCCESS = "success"
FAILURE = "failure"
UNCHANGED = "unchanged"

ReloadCallback = Callable[[str, "str | None"], None]
PolicyListener = Callable[[Policy], None]
_Signature = tuple[int, int, int, int]


def _signature(path: str) -> _Signature:
    stat = os.stat(path)  # follows symlinks: the ConfigMap's current ..data target
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read(MAX_POLICY_BYTES + 1)


class PolicyHolder:
    """Holds the current Engine; `engine` is always a complete, valid one.

    Readers take `holder.engine` once per request and use that object throughout,
    so a reload in the middle of a request never mixes two policies.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        registry: Registry | None = None,
        on_reload: ReloadCallback | None = None,
    ) -> None:
        """Load the file now; an invalid file at start-up raises PolicyError (nothing to fall back on)."""
        self.path = os.fspath(path)
        self._registry = registry
        self._on_reload = on_reload
        self._listeners: list[PolicyListener] = []
        self._preparers: list[PolicyListener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        try:
            signature = _signature(self.path)
            text = _read(self.path)
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{self.path}: cannot read the policy file: {exc}") from None
        self._engine = Engine(load_policy(text, source=self.path, registry=registry))
        self._signature = signature
        self._seen_digest = self._engine.policy.digest

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def policy(self) -> Policy:
        return self._engine.policy

    def add_listener(self, listener: PolicyListener) -> None:
        """Call `listener(new_policy)` after each successful reload (e.g. to restart the usage loop)."""
        self._listeners.append(listener)

    def add_preparer(self, preparer: PolicyListener) -> None:
        """Call `preparer(new_policy)` before a reloaded policy replaces the current one; it
        may block (it runs on the reloading thread) and raise to refuse the new policy."""
        self._preparers.append(preparer)

    def maybe_reload(self) -> str:
        """Check the file once; returns (and reports) "success", "failure" or "unchanged"."""
        with self._lock:
            outcome, error = self._check()
        if outcome == FAILURE:
            log.error(
                "policy %s not reloaded, keeping digest %s: %s", self.path, self.policy.digest[:12], error
            )
        elif outcome == SUCCESS:
            log.info("policy %s reloaded, digest %s", self.path, self.policy.digest[:12])
            for listener in self._listeners:
                try:
                    listener(self.policy)
                except Exception:  # one broken listener must not stop the others or the reloads
                    log.exception("policy listener failed after a reload")
        if self._on_reload is not None:
            try:
                self._on_reload(outcome, error)
            except Exception:  # a broken metrics hook must not stop reloading
                log.exception("policy reload callback failed")
        return outcome

    def _check(self) -> tuple[str, str | None]:
        try:
            signature = _signature(self.path)
            if signature == self._signature:
                return UNCHANGED, None
            text = _read(self.path)
        except (OSError, UnicodeDecodeError) as exc:
            # Mid-swap or deleted: say so, keep serving; the next check will look again.
            self.last_error = f"cannot read the policy file: {exc}"
            return FAILURE, self.last_error
        digest = hashlib.sha256(text.encode()).hexdigest()
        self._signature = signature
        if digest == self._seen_digest:
            return UNCHANGED, None  # touched, or an already-reported bad version
        self._seen_digest = digest
        try:
            policy = load_policy(text, source=self.path, registry=self._registry)
        except PolicyError as exc:
            self.last_error = str(exc)
            return FAILURE, self.last_error
        try:
            for prepare in self._preparers:
                prepare(policy)
        except Exception as exc:  # the old policy keeps serving
            self.last_error = f"could not prepare for the new policy: {exc}"
            return FAILURE, self.last_error
        self._engine = Engine(policy)
        self.last_error = None
        return SUCCESS, None

    def start_watching(self, interval: float = 2.0) -> threading.Thread:
        """Poll the file from a daemon thread every `interval` seconds until `stop_watching`."""
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._watch, args=(interval,), name="policy-reloader", daemon=True
        )
        self._thread.start()
        return self._thread

    def _watch(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.maybe_reload()
            except Exception:  # keep watching whatever happens
                log.exception("policy reload check failed")

    def stop_watching(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


class FixedPolicy:
    """The built-in default policy, behind the same interface as a file-backed PolicyHolder."""

    def __init__(self, policy: Policy) -> None:
        self.engine = Engine(policy)

    @property
    def policy(self) -> Policy:
        return self.engine.policy

    def start_watching(self, interval: float = 2.0) -> None:
        """Nothing to watch: the default is compiled in."""

    def add_listener(self, listener: Any) -> None:
        """It never changes, so there is nothing to tell."""

    def add_preparer(self, preparer: Any) -> None:
        """It never changes, so there is nothing to prepare for."""

    def stop_watching(self, timeout: float | None = 5.0) -> None:
        """Nothing was started."""
