"""The figures the reliability tests collect, printed at the end of the run.

One module-level `FIGURES` that the tests fill as they go; `conftest.py` prints it in
pytest's terminal summary and, when $RELIABILITY_FIGURES names a file, writes it there
as JSON (bench/reliability_summary.py reads that file).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

FIGURES_ENV = "RELIABILITY_FIGURES"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of `values`; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass
class Fuzz:
    bodies: int = 0
    server_errors: int = 0  # replies with status >= 500
    bad_error_bodies: int = 0  # 4xx without {"Error": non-empty string}
    state_changes_on_invalid: int = 0
    legit_binds: int = 0  # /bind bodies that were valid and bound a pod (state change allowed)
    by_channel: Counter = field(default_factory=Counter)  # "in-process", "gunicorn"
    by_verb: Counter = field(default_factory=Counter)
    by_status: Counter = field(default_factory=Counter)


@dataclass
class Schemathesis:
    cases: int = 0
    failures: int = 0
    server_errors: int = 0
    by_operation: Counter = field(default_factory=Counter)


@dataclass
class Load:
    requests: int = 0
    errors: int = 0  # 5xx, unexpected statuses, connection errors
    seconds: float = 0.0
    clients: int = 0
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    by_verb: Counter = field(default_factory=Counter)

    @property
    def p50(self) -> float:
        return percentile(self.latencies_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 99)


@dataclass
class Fault:
    name: str
    injected: int
    survived: bool
    detail: str = ""
    server: str = ""  # "fake" or "real" for the API-server faults (which API server took them)


@dataclass
class Figures:
    fuzz: Fuzz = field(default_factory=Fuzz)
    schemathesis: Schemathesis = field(default_factory=Schemathesis)
    load: Load = field(default_factory=Load)
    faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fault(self, name: str, injected: int, survived: bool, detail: str = "", server: str = "") -> None:
        with self._lock:
            self.faults.append(Fault(name, injected, survived, detail, server))

    def to_dict(self) -> dict[str, Any]:
        load = _plain(self.load)
        load.pop("latencies_ms")
        load.update(p50_ms=round(self.load.p50, 2), p99_ms=round(self.load.p99, 2))
        return {
            "fuzz": _plain(self.fuzz),
            "schemathesis": _plain(self.schemathesis),
            "load": load,
            "faults": [asdict(f) for f in self.faults],
        }

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")


def _plain(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as JSON-ready values (asdict would rebuild a Counter from pairs)."""
    return {f.name: dict(v) if isinstance(v := getattr(obj, f.name), Counter) else v for f in fields(obj)}


FIGURES = Figures()


def summary_lines(data: dict[str, Any]) -> list[str]:
    """The summary as text, from `Figures.to_dict()` (so the bench script prints the same)."""
    fuzz, schema, load, faults = data["fuzz"], data["schemathesis"], data["load"], data["faults"]
    channels = ", ".join(f"{k} {v}" for k, v in sorted(fuzz["by_channel"].items())) or "none"
    verbs = ", ".join(f"{k} {v}" for k, v in sorted(fuzz["by_verb"].items())) or "none"
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(fuzz["by_status"].items())) or "none"
    lines = [
        f"fuzzing:      {fuzz['bodies']} bodies ({channels}; {verbs})",
        f"              5xx replies: {fuzz['server_errors']}; 4xx without an Error: {fuzz['bad_error_bodies']}; "
        f"state changed by invalid input: {fuzz['state_changes_on_invalid']}; valid binds: {fuzz['legit_binds']}",
        f"              statuses: {statuses}",
        f"schemathesis: {schema['cases']} cases in {len(schema['by_operation'])} operation/mode runs; "
        f"failures: {schema['failures']} (5xx: {schema['server_errors']})",
    ]
    if load["requests"]:
        per_verb = ", ".join(f"{k} {v}" for k, v in sorted(load["by_verb"].items()))
        rate = load["requests"] / load["seconds"] if load["seconds"] else 0.0
        lines.append(
            f"load:         {load['requests']} requests in {load['seconds']:.1f} s from {load['clients']} clients "
            f"({rate:.0f}/s); errors: {load['errors']}; p50 {load['p50_ms']:.1f} ms, p99 {load['p99_ms']:.1f} ms"
        )
        lines.append(f"              {per_verb}")
    else:
        lines.append("load:         not run")
    survived = sum(1 for f in faults if f["survived"])
    injected = sum(f["injected"] for f in faults)
    real = sum(1 for f in faults if f.get("server") == "real")
    lines.append(f"faults:       {len(faults)} scenarios, {injected} faults injected, "
                 f"{survived}/{len(faults)} survived" + (f" ({real} on a real control plane)" if real else ""))
    for f in faults:
        mark = "ok  " if f["survived"] else "FAIL"
        where = f"[{f['server']}] " if f.get("server") else ""
        lines.append(f"  {mark} {where}{f['name']}: {f['injected']} injected"
                     + (f"; {f['detail']}" if f["detail"] else ""))
    return lines
