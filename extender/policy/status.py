"""Filter outcomes, after kube-scheduler's framework `Status`.

A reason is a short fixed phrase ("Insufficient cpu") so that kube-scheduler and
our own summaries can count identical reasons across nodes; the per-node numbers
go into `detail`, which explain and the logs show.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    UNSCHEDULABLE = 1  # preemption might help
    UNRESOLVABLE = 2  # preemption cannot help (goes to FailedAndUnresolvableNodes)
    ERROR = 3  # the plugin itself failed; never shown as a node reason


@dataclass(frozen=True, slots=True)
class Status:
    """`reasons` are counted one by one in summaries; `reason` is what one node's line says."""

    code: Code
    reasons: tuple[str, ...] = ()
    detail: str = ""
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def reason(self) -> str:
        return ", ".join(self.reasons)

    def stamped(self, plugin: str) -> Status:
        return self if self.plugin == plugin else replace(self, plugin=plugin)


def unschedulable(*reasons: str, detail: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, detail)


def unresolvable(*reasons: str, detail: str = "") -> Status:
    return Status(Code.UNRESOLVABLE, reasons, detail)
