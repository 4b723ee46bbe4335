"""scheduler_perf's workloads, read from the kubernetes source in the Go module cache.

Each ``performance-config.yaml`` is a list of test cases; a test case has a
``workloadTemplate`` (operations whose counts may name a ``$param``) and ``workloads``
(the variants: a name and the params). ``load_workloads`` resolves every variant into a
:class:`Workload` whose operations are plain dicts with the params substituted and the
template paths made absolute, or with ``skip`` saying why we cannot run it (an opcode
we do not implement, a DRA driver, a custom scheduler configuration).

Object templates are Go ``text/template`` files; the corpus uses only ``{{.Index}}``,
``{{.Count}}`` and the arithmetic helpers of operations.go (``Mod``, ``DivideInt``, ...),
which :func:`render` evaluates. Anything else raises :class:`TemplateError`.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from bench.scheduler_perf import profiles

VERSION = "v1.36.3"
RELATIVE = Path("test/integration/scheduler_perf")
#: The folders of the corpus, in the order the table lists them.
FOLDERS = ("misc", "affinity", "topology_spreading", "volumes", "event_handling", "dra", "nodedeclaredfeatures")
#: Opcodes the executor runs; any other makes the workload skipped, saying which.
SUPPORTED = frozenset({
    "createNodes", "createNamespaces", "createPods", "createPodSets", "deletePods", "churn", "barrier",
    "sleep", "startCollectingMetrics", "stopCollectingMetrics", "createAny", "updateAny",
    "createResourceDriver", "allocResourceClaims",
})
#: Fields of each opcode that name a template file, relative to the config file's folder.
PATH_FIELDS = ("nodeTemplatePath", "podTemplatePath", "namespaceTemplatePath", "templatePath",
               "persistentVolumeTemplatePath", "persistentVolumeClaimTemplatePath")


class CorpusError(Exception):
    """The corpus cannot be found or read; the message says what to do."""


class TemplateError(Exception):
    """A template uses Go template syntax that :func:`render` does not evaluate."""


def _module_roots() -> Iterable[Path]:
    """Where Go module caches usually are: $GOMODCACHE, $GOPATH/pkg/mod, `go env`, the
    cache of ../shared/tools/k8s-test-binaries.sh (its own GOPATH), ~/go/pkg/mod."""
    if os.environ.get("GOMODCACHE"):
        yield Path(os.environ["GOMODCACHE"])
    for gopath in filter(None, os.environ.get("GOPATH", "").split(os.pathsep)):
        yield Path(gopath) / "pkg" / "mod"
    go = shutil.which("go")
    if go:
        try:
            out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=20)
            if out.stdout.strip():
                yield Path(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    yield Path.home() / ".cache" / "k8s-test-binaries" / "gopath" / "pkg" / "mod"
    yield Path.home() / "go" / "pkg" / "mod"


def locate(explicit: Path | None = None) -> Path:
    """The scheduler_perf folder of kubernetes v1.36.3: ``explicit`` (a kubernetes source
    tree or the scheduler_perf folder itself), $SCHEDULER_PERF_DIR, or the module cache."""
    candidates: list[Path] = []
    if explicit is not None:
        candidates += [explicit, explicit / RELATIVE]
    elif os.environ.get("SCHEDULER_PERF_DIR"):
        candidates.append(Path(os.environ["SCHEDULER_PERF_DIR"]))
    else:
        candidates += [root / f"k8s.io/kubernetes@{VERSION}" / RELATIVE for root in _module_roots()]
    for path in candidates:
        if (path / "misc" / "performance-config.yaml").is_file():
            return path
    raise CorpusError(
        f"no scheduler_perf corpus (k8s.io/kubernetes@{VERSION}/{RELATIVE}) in "
        f"{', '.join(str(c) for c in candidates) or 'the module cache'}; run "
        f"`go mod download k8s.io/kubernetes@{VERSION}` (../shared/tools/k8s-test-binaries.sh does) "
        "or pass --source DIR")


# ---- Go templates ------------------------------------------------------------------------------

def _number(value: Any) -> float:
    return float(value)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "AddInt": lambda *n: int(sum(map(_number, n))),
    "AddFloat": lambda *n: sum(map(_number, n)),
    "SubtractInt": lambda a, b: int(_number(a) - _number(b)),
    "SubtractFloat": lambda a, b: _number(a) - _number(b),
    "MultiplyInt": lambda *n: int(math.prod(map(_number, n))),
    "MultiplyFloat": lambda *n: math.prod(map(_number, n)),
    "DivideInt": lambda a, b: int(_number(a) / _number(b)),  # Go: int(float division), truncates
    "DivideFloat": lambda a, b: _number(a) / _number(b),
    "Mod": lambda a, b: int(math.fmod(int(_number(a)), int(_number(b)))),
}
_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}")


def _argument(token: str, env: dict[str, Any]) -> Any:
    if token.startswith(".") and token[1:] in env:
        return env[token[1:]]
    if re.fullmatch(r"-?\d+", token):
        return int(token)
    if re.fullmatch(r"-?\d+\.\d*", token):
        return float(token)
    raise TemplateError(f"unsupported template argument {token!r}")


def _action(text: str, env: dict[str, Any]) -> str:
    tokens = text.split()
    if len(tokens) == 1:
        value = _argument(tokens[0], env)
    elif tokens and tokens[0] in _FUNCTIONS:
        value = _FUNCTIONS[tokens[0]](*(_argument(t, env) for t in tokens[1:]))
    else:
        raise TemplateError(f"unsupported template action {{{{{text}}}}}")
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value)) if abs(value) < 1e21 else repr(value)
    return str(value)


def render(text: str, index: int = 0, count: int = 1) -> Any:
    """The template evaluated for object ``index`` of ``count``, parsed as YAML."""
    env = {"Index": index, "Count": count}
    return yaml.safe_load(_ACTION.sub(lambda m: _action(m.group(1), env), text))


@lru_cache(maxsize=256)
def template_text(path: str) -> str:
    return Path(path).read_text()


def is_templated(path: str) -> bool:
    return "{{" in template_text(path)


def load_object(path: str, index: int = 0, count: int = 1) -> dict[str, Any]:
    """Object ``index`` of ``count`` from a template file (rendered each time only when the
    file has template actions)."""
    if not is_templated(path):
        return _static(path)
    obj = render(template_text(path), index, count)
    if not isinstance(obj, dict):
        raise TemplateError(f"{path} does not hold one object")
    return obj


@lru_cache(maxsize=256)
def _parsed(path: str) -> Any:
    return yaml.safe_load(template_text(path))


def _static(path: str) -> dict[str, Any]:
    import copy

    obj = _parsed(path)
    if not isinstance(obj, dict):
        raise TemplateError(f"{path} does not hold one object")
    return copy.deepcopy(obj)


# ---- workloads -----------------------------------------------------------------------------------

@dataclass
class Workload:
    """One variant of one test case, its operations resolved."""

    folder: str
    name: str  # the test case's name, e.g. SchedulingBasic
    variant: str  # e.g. 5000Nodes
    params: dict[str, Any]
    ops: list[dict[str, Any]]
    default_pod_template: str | None
    feature_gates: dict[str, bool] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    threshold: float | None = None
    skip: str = ""
    # The test case's own KubeSchedulerConfiguration (schedulerConfigPath), when it has one that
    # profiles.translate can give both schedulers.
    scheduler_config: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{self.name}/{self.variant}"

    @property
    def size(self) -> tuple[int, int]:
        """(nodes, pods) the workload creates, from its operations (churn not counted)."""
        nodes = sum(op.get("count", 0) for op in self.ops if op["opcode"] == "createNodes")
        pods = sum(op.get("count", 0) for op in self.ops if op["opcode"] == "createPods")
        return nodes, pods

    @property
    def uses_dra(self) -> bool:
        """A workload of the dra folder: it needs the resource-claim controller running."""
        return self.folder.split("/")[0] == "dra"

    @property
    def taint_rules(self) -> bool:
        """It creates DeviceTaintRules: kube-apiserver must serve them (TAINT_RULE_RUNTIME_CONFIG)
        and kube-scheduler apply them (its DRADeviceTaintRules gate), as ours does where served."""
        return any(op["opcode"] == "createAny" and _template_kind(op.get("templatePath", "")) == "DeviceTaintRule"
                   for op in self.ops)

    @property
    def node_declared_features(self) -> bool:
        """It runs with the NodeDeclaredFeatures gate (the nodedeclaredfeatures folder): nodes get
        status.declaredFeatures after their creation, and both schedulers run the filter."""
        return self.feature_gates.get(NODE_DECLARED_FEATURES_GATE) is True

    @property
    def declared_features(self) -> list[str]:
        """What node_declared_features_test.go's updateNodesWithDeclaredFeatures writes into each
        node's status.declaredFeatures: Feature1..FeatureN (N = numNodeDeclaredFeatures, 0 when
        unset), sorted as strings (sort.Strings; the API server requires the list sorted)."""
        if not self.node_declared_features:
            return []
        count = self.params.get("numNodeDeclaredFeatures", 0)
        return sorted(f"Feature{i}" for i in range(1, int(count) + 1))

    @property
    def apiserver_args(self) -> list[str]:
        """kube-apiserver's flags: the served DRA versions and every gate the workload needs in one
        --feature-gates (the API server keeps status.declaredFeatures only with its gate on)."""
        args = [TAINT_RULE_RUNTIME_CONFIG] if self.taint_rules else []
        gates = self.kube_scheduler_gates
        return [*args, f"--feature-gates={gates}"] if gates else args

    @property
    def kube_scheduler_gates(self) -> str:
        gates = ["DRADeviceTaintRules=true"] if self.taint_rules else []
        if self.node_declared_features:
            gates.append(f"{NODE_DECLARED_FEATURES_GATE}=true")
        return ",".join(gates)

    @property
    def our_policy_plugins(self) -> tuple[str, ...]:
        """Filters our standalone policy adds for this workload, as kube-scheduler's gates add
        plugins to its default profile (profiles.with_filters)."""
        return (NODE_DECLARED_FEATURES_GATE,) if self.node_declared_features else ()

    @property
    def disables_gates(self) -> bool:
        """A variant that turns a feature off measures a configuration kube-scheduler
        v1.36.3 does not ship with (we do not pass feature gates to either scheduler)."""
        return any(value is False for value in self.feature_gates.values())


#: DeviceTaintRules are an off-by-default API in v1.36 (scheduler_perf's own apiserver serves every
#: API): served here, in both versions, for the workloads that create them (the template is v1alpha3,
#: kube-scheduler's informer reads v1beta2).
TAINT_RULE_RUNTIME_CONFIG = "--runtime-config=resource.k8s.io/v1alpha3=true,resource.k8s.io/v1beta2=true"
#: The gate of the nodedeclaredfeatures folder, and the name of the plugin it enables in
#: kube-scheduler's default profile (and of our filter).
NODE_DECLARED_FEATURES_GATE = "NodeDeclaredFeatures"


@lru_cache(maxsize=256)
def _template_kind(path: str) -> str:
    """A template's kind, read off its top-level ``kind:`` line: a Go template ({{.Index}} as a
    value) is no YAML until rendered."""
    try:
        text = Path(path).read_text() if path else ""
    except OSError:
        return ""
    found = re.search(r"^kind:\s*([A-Za-z0-9]+)\s*$", text, re.MULTILINE)
    return found.group(1) if found else ""


def _param(params: dict[str, Any], name: str, kind: type) -> Any:
    key = name[1:] if name.startswith("$") else name
    if key not in params:
        raise KeyError(f"parameter {key} is undefined")
    value = params[key]
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise KeyError(f"parameter {key} has the wrong type {type(value).__name__}")
        return int(value)
    if not isinstance(value, kind):
        raise KeyError(f"parameter {key} has the wrong type {type(value).__name__}")
    return value


def resolve_op(raw: dict[str, Any], params: dict[str, Any], base: Path) -> dict[str, Any]:
    """One operation with ``countParam``/``durationParam``/``steadyStateParam``/
    ``maxClaimsPerNodeParam`` replaced by ``count``/``duration``/``steadyState``/
    ``maxClaimsPerNode`` and template paths made absolute."""
    op = dict(raw)
    if "countParam" in op:
        op["count"] = _param(params, op.pop("countParam"), int)
    if "durationParam" in op:
        op["duration"] = _param(params, op.pop("durationParam"), str)
    if "steadyStateParam" in op:
        op["steadyState"] = _param(params, op.pop("steadyStateParam"), bool)
    if "maxClaimsPerNodeParam" in op:  # createResourceDriver (dra.go)
        op["maxClaimsPerNode"] = _param(params, op.pop("maxClaimsPerNodeParam"), int)
    for name in PATH_FIELDS:
        if op.get(name):
            op[name] = str((base / op[name]).resolve())
    if op.get("templatePaths"):
        op["templatePaths"] = [str((base / p).resolve()) for p in op["templatePaths"]]
    if isinstance(op.get("createPodsOp"), dict):
        op["createPodsOp"] = resolve_op(op["createPodsOp"], params, base)
    return op


def unroll(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """createPodSets replaced by one createPods per namespace ``PREFIX-i``, as
    scheduler_perf.go's unrollWorkloadTemplate does before it numbers the operations (so the
    default namespaces ``namespace-<op index>`` of later operations match its own)."""
    unrolled = []
    for op in ops:
        if op["opcode"] == "createPodSets":
            for i in range(op.get("count", 0)):
                unrolled.append({**op.get("createPodsOp", {}), "namespace": f"{op.get('namespacePrefix', '')}-{i}"})
        else:
            unrolled.append(op)
    return unrolled


#: Folders skipped whole, with the reason. None now: nodedeclaredfeatures runs with its gate on
#: kube-apiserver and kube-scheduler, our NodeDeclaredFeatures filter, and the nodes' declared
#: features written by the executor after createNodes (as its Go nodeUpdateFn does).
SKIPPED_FOLDERS: dict[str, str] = {}


#: The v1.36.3 defaults of the feature gates the DRA workloads set (pkg/features/
#: kube_features.go); True in the second place: locked to its default (it cannot be changed).
DRA_GATE_DEFAULTS = {
    "DynamicResourceAllocation": (True, True),  # GA in 1.34, locked in 1.35
    "SchedulerQueueingHints": (True, True),  # GA in 1.34, locked
    "DRAPrioritizedList": (True, False),  # GA in 1.36
    "DRAResourceClaimDeviceStatus": (True, False),  # beta since 1.33
    "DRAConsumableCapacity": (True, False),  # beta in 1.36
    "DRADeviceTaints": (True, False),
    "DRAPartitionableDevices": (True, False),
    "DRAExtendedResource": (True, False),
    "DRADeviceBindingConditions": (True, False),
    "DRADeviceTaintRules": (False, False),  # beta, off: its API is an off-by-default beta API (served
    # here for the workloads that create rules: Workload.taint_rules)
}


def _gate_skip(gates: dict[str, bool]) -> str:
    """Why a DRA variant cannot run as kube-scheduler v1.36.3 ships (we pass no feature
    gates to either scheduler): a gate set away from its default, or one we do not know."""
    for gate, value in sorted(gates.items()):
        if gate not in DRA_GATE_DEFAULTS:
            return f"needs feature gate {gate}={str(value).lower()}, whose v1.36.3 default is not recorded here"
        default, locked = DRA_GATE_DEFAULTS[gate]
        if value != default:
            state = "locked to" if locked else "off by default, default"
            return (f"needs feature gate {gate}={str(value).lower()}, {state} {str(default).lower()} "
                    f"in v1.36.3")
    return ""


def _folder_skip(folder: str) -> str:
    for skipped, reason in SKIPPED_FOLDERS.items():
        if folder == skipped or folder.startswith(skipped + "/"):
            return reason
    return ""


def _why_skip(ops: list[dict[str, Any]], case: dict[str, Any], folder: str = "",
              gates: dict[str, bool] | None = None) -> str:
    if _folder_skip(folder):
        return _folder_skip(folder)
    if folder.split("/")[0] == "dra" and _gate_skip(gates or {}):
        return _gate_skip(gates or {})
    unsupported = sorted({op["opcode"] for op in ops if op["opcode"] not in SUPPORTED})
    if unsupported:
        return f"opcode(s) {', '.join(unsupported)} not implemented"
    for op in ops:
        for key in ("labelNodePrepareStrategy", "nodeAllocatableStrategy", "uniqueNodeLabelStrategy"):
            if key in op and not isinstance(op[key], dict):
                return f"{op['opcode']}.{key} is not a mapping"
    return ""


def _scheduler_config(case: dict[str, Any], folder: Path) -> tuple[dict[str, Any] | None, str]:
    """The case's scheduler configuration and "", or None and why it cannot be given to both."""
    name = case.get("schedulerConfigPath")
    if not name:
        return None, ""
    try:
        config = profiles.load(folder / name)
        profiles.translate(config)
    except (OSError, profiles.Untranslatable) as exc:
        return None, f"its scheduler configuration ({name}) has no translation for ours: {exc}"
    return config, ""


def load_file(path: Path, root: Path) -> list[Workload]:
    """Every variant of every test case in one performance-config.yaml."""
    cases = yaml.safe_load(path.read_text()) or []
    folder = str(path.parent.relative_to(root))
    workloads = []
    for case in cases:
        default = case.get("defaultPodTemplatePath")
        default_path = str((path.parent / default).resolve()) if default else None
        for variant in case.get("workloads") or []:
            params = dict(variant.get("params") or {})
            gates = {**(case.get("featureGates") or {}), **(variant.get("featureGates") or {})}
            try:
                ops = unroll([resolve_op(op, params, path.parent) for op in case["workloadTemplate"]])
                skip = _why_skip(ops, case, folder, gates)
            except KeyError as exc:
                ops, skip = [], f"cannot resolve its params: {exc.args[0]}"
            config, config_skip = _scheduler_config(case, path.parent)
            skip = skip or config_skip
            workloads.append(Workload(
                folder=folder, name=case["name"], variant=variant["name"], params=params, ops=ops,
                default_pod_template=default_path, feature_gates=gates,
                labels=list(variant.get("labels") or case.get("labels") or []),
                threshold=variant.get("threshold"), skip=skip, scheduler_config=config,
            ))
    return workloads


def load_workloads(root: Path) -> list[Workload]:
    """Every workload variant of the corpus, folder by folder (FOLDERS order, then the rest)."""
    files = sorted(root.rglob("performance-config.yaml"))
    if not files:
        raise CorpusError(f"{root} holds no performance-config.yaml")

    def order(path: Path) -> tuple[int, str]:
        top = path.relative_to(root).parts[0]
        return (FOLDERS.index(top) if top in FOLDERS else len(FOLDERS), str(path))

    workloads: list[Workload] = []
    for path in sorted(files, key=order):
        workloads += load_file(path, root)
    return workloads


def largest(workloads: Iterable[Workload], max_nodes: int | None = None, max_pods: int | None = None
            ) -> list[Workload]:
    """Per test case, its biggest variant (within ``max_nodes`` nodes and ``max_pods`` pods when
    given), preferring variants that leave the feature gates at their defaults; a test case whose
    every variant is too big keeps its smallest (it says so through its size)."""
    return [chosen for chosen, _ in largest_with_bounds(workloads, max_nodes, max_pods)]


def largest_with_bounds(workloads: Iterable[Workload], max_nodes: int | None, max_pods: int | None
                        ) -> list[tuple[Workload, Workload | None]]:
    """`largest`, each with the bigger variant a bound left out (None when it chose the biggest)."""
    by_case: dict[str, list[Workload]] = {}
    for workload in workloads:
        by_case.setdefault(workload.name, []).append(workload)
    chosen = []
    for variants in by_case.values():
        default_gates = [w for w in variants if not w.disables_gates] or variants
        fitting = [w for w in default_gates if (max_nodes is None or w.size[0] <= max_nodes)
                   and (max_pods is None or w.size[1] <= max_pods)]
        pool = fitting or [min(default_gates, key=lambda w: w.size)]
        best = max(pool, key=lambda w: (w.size, -len(w.feature_gates)))
        biggest = max(default_gates, key=lambda w: (w.size, -len(w.feature_gates)))
        chosen.append((best, None if biggest is best else biggest))
    return chosen


def smallest(workloads: Iterable[Workload]) -> list[Workload]:
    """Per test case, its smallest variant (the one the integration CI runs)."""
    by_case: dict[str, list[Workload]] = {}
    for workload in workloads:
        by_case.setdefault(workload.name, []).append(workload)
    return [min(v, key=lambda w: (w.size, w.disables_gates, len(w.feature_gates))) for v in by_case.values()]


def select(workloads: list[Workload], names: Iterable[str]) -> list[Workload]:
    """The workloads named NAME/VARIANT (or NAME alone: its every variant); an unknown name
    raises KeyError naming it."""
    chosen = []
    for name in names:
        case, _, variant = name.partition("/")
        found = [w for w in workloads if w.name == case and (not variant or w.variant == variant)]
        if not found:
            raise KeyError(name)
        chosen += [w for w in found if w not in chosen]
    return chosen
