"""Webhook settings: one dataclass, filled from the command line or the environment.

gunicorn builds the app inside each worker (after fork, so that watch threads
belong to the worker), which only sees the environment: `extender serve` writes
its options there as `EXTENDER_*` variables, and plain `gunicorn -c
config/gunicorn.conf.py` reads the same variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from extender.errors import ExtenderError

PREFIX = "EXTENDER_"
DEFAULT_MAX_BODY = 64 * 1024 * 1024  # 5000 full nodes at ~8 KB each, with room to spare


@dataclass(frozen=True)
class Settings:
    policy: str = ""  # a policy file; empty = the built-in default for the mode
    policy_mode: str = "webhook"
    source: str = "auto"  # auto | kube | snapshot
    snapshot: str = ""
    kubeconfig: str = ""
    context: str = ""
    url_prefix: str = ""
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    bind_verb: str = "bind"
    preempt_verb: str = "preempt"
    explain_verb: str = "explain"  # served only with enable_explain
    enable_bind: bool = True
    enable_explain: bool = False
    scheduler_names: tuple[str, ...] = ("default-scheduler",)
    namespaces_allow: tuple[str, ...] = ()  # empty = every namespace
    namespaces_deny: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY
    assume_ttl: float = 30.0
    lease_namespace: str = ""  # the device and gang ledgers' Leases; empty = the pod's namespace, else scheduler-extender
    # How long /bind holds a pod-group member for its quorum (docs/gangs.md): below the extender's
    # httpTimeout in kube-scheduler's configuration, by a margin for the Binding call.
    gang_hold: float = 25.0
    # How long a held pod group that gave way to a competing gang is refused (docs/gangs.md).
    gang_give_way_backoff: float = 5.0
    log_format: str = "text"
    log_level: str = "INFO"
    # Every successful filter and prioritize call in the access log (two lines per pod);
    # off, they are counted in the metrics and only other calls and failures are logged.
    access_log: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(PREFIX + f.name.upper())
            if raw is None:
                continue
            values[f.name] = _parse(f.name, f.type, raw)
        return replace(cls(), **values)

    def to_env(self) -> dict[str, str]:
        env = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = "true" if value else "false"
            env[PREFIX + f.name.upper()] = str(value)
        return env

    def verb_path(self, verb: str) -> str:
        prefix = "/" + self.url_prefix.strip("/") if self.url_prefix.strip("/") else ""
        return f"{prefix}/{getattr(self, verb + '_verb').strip('/')}"


def _parse(name: str, kind: Any, raw: str) -> Any:
    kind = str(kind)
    try:
        if "bool" in kind:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError("expected true or false")
            return raw.lower() in ("1", "true", "yes")
        if "tuple" in kind:
            return tuple(item.strip() for item in raw.split(",") if item.strip())
        if "int" in kind:
            return int(raw)
        if "float" in kind:
            return float(raw)
    except ValueError as exc:
        raise ExtenderError(f"{PREFIX}{name.upper()}={raw!r}: {exc}") from None
    return raw


def config_dir() -> Path:
    """Where the shipped config/ lives: $EXTENDER_CONFIG_DIR, else the source checkout's config/."""
    explicit = os.environ.get("EXTENDER_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    checkout = Path(__file__).resolve().parent.parent / "config"
    return checkout if checkout.is_dir() else Path.cwd() / "config"


def default_snapshot() -> Path:
    return config_dir() / "snapshot.yaml"
