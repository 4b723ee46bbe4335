"""Profiles: several schedulerNames in one process, each with its own policy.

kube-scheduler calls these profiles: one queue, one cluster state, one leader lease,
and a framework per schedulerName. Here each profile is a schedulerName and a policy
holder (a reloading file, or the built-in standalone default); the scheduler takes the
holder's current engine once per cycle, so a policy reload never splits a decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from extender.errors import PolicyError
from extender.policy.engine import Engine

DEFAULT_SCHEDULER_NAME = "extender-scheduler"
STANDALONE = "standalone"


@dataclass
class Profile:
    """A schedulerName and the policy holder its pods are scheduled with."""

    name: str
    policy: Any  # PolicyHolder or runtime.FixedPolicy: `.engine`, start_watching(), stop_watching()

    @property
    def engine(self) -> Engine:
        return self.policy.engine  # type: ignore[no-any-return]  # every policy holder's engine is an Engine

    @classmethod
    def from_engine(cls, name: str, engine: Engine) -> Profile:
        """A profile with a fixed engine (tests, benchmarks, simulate)."""
        return cls(name, _Fixed(engine))


class _Fixed:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def start_watching(self, interval: float = 2.0) -> None:
        """Nothing to reload."""

    def add_listener(self, listener: Any) -> None:
        """It never changes, so there is nothing to tell."""

    @property
    def policy(self) -> Any:
        return self.engine.policy

    def stop_watching(self, timeout: float | None = 5.0) -> None:
        """Nothing was started."""


def parse_profile_option(text: str) -> tuple[str, str]:
    """`NAME=POLICYFILE` (the file may be empty: `NAME=` uses the built-in default)."""
    name, sep, path = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"{text!r}: expected NAME=POLICYFILE")
    if not _valid_scheduler_name(name):
        raise ValueError(f"{name!r} is not a valid schedulerName (a DNS subdomain)")
    return name, path.strip()


def _valid_scheduler_name(name: str) -> bool:
    if len(name) > 253:
        return False
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-.")
    return bool(name) and set(name) <= allowed and name[0].isalnum() and name[-1].isalnum()


def build_profiles(scheduler_name: str, policy_path: str | None,
                   extra: Iterable[tuple[str, str]] = ()) -> list[Profile]:
    """The main profile (`--scheduler-name` with `--policy`) plus one per `--profile NAME=FILE`.

    A `--profile` may name the main schedulerName to give it its policy (then `--policy`
    must not). A name given twice is an error (its pods could only follow one policy).
    Raises PolicyError for a policy file that does not load.
    """
    # late: startup loads the policy loader and the kubernetes and prometheus clients (~0.5 s), and
    # `extender schedule --help` imports this module (cli/schedule.py) and needs none of it
    from extender.startup import make_policy_holder

    if not _valid_scheduler_name(scheduler_name):
        raise PolicyError(f"{scheduler_name!r} is not a valid schedulerName (a DNS subdomain)")
    wanted = list(extra)
    if any(name == scheduler_name for name, _ in wanted):
        if policy_path:
            raise PolicyError(f"the policy of {scheduler_name!r} is given by both --policy and --profile")
    else:
        wanted.insert(0, (scheduler_name, policy_path or ""))
    seen: set[str] = set()
    profiles = []
    for name, path in wanted:
        if name in seen:
            raise PolicyError(f"schedulerName {name!r} is given more than once")
        seen.add(name)
        profiles.append(Profile(name, make_policy_holder(path, STANDALONE)))
    return profiles
