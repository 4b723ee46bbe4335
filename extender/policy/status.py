"""Filter outcomes, after kube-scheduler's framework `Status`.

A reason is a short fixed phrase ("Insufficient cpu") so that kube-scheduler and
our own summaries can count identical reasons across nodes; the per-node numbers
go into `detail`, which explain and the logs show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    UNSCHEDULABLE = 1  # preemption might help
    UNRESOLVABLE = 2  # preemption cannot help (goes to FailedAndUnresolvableNodes)
    ERROR = 3  # the plugin itself failed; never shown as a node reason


Detail = str | Callable[[], str]


@dataclass(frozen=True, slots=True)
class Status:
    """`reasons` are counted one by one in summaries; `reason` is what one node's line says.

    `note` is the per-node detail, or a function that writes it: a refusal on a full
    cluster happens for thousands of nodes per request, and only explain and the logs
    ever read the numbers, so formatting them is deferred until `detail` is read.
    """

    code: Code
    reasons: tuple[str, ...] = ()
    note: Detail = field(default="", compare=False)
    plugin: str = ""

    @property
    def detail(self) -> str:
        return self.note if isinstance(self.note, str) else self.note()

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
