"""The layering of docs/architecture.md, enforced.

The pure packages (model, dra, policy, gangs, cycle) import no HTTP framework, no Kubernetes
client and no schema library, so the webhook, the standalone scheduler and simulate can only
differ in their adapters; the cluster state speaks to no API server (that is extender/kube), so
simulate runs it with no network. Above them, `LAYERS` is the whole order: an import that goes up
or sideways (one mode into another) fails, and so does a project import inside a function that
does not say why it is late.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "extender"
HTTP = {"flask", "werkzeug", "gunicorn", "kubernetes", "urllib3", "http", "socket", "ssl", "requests",
        "extender.kube", "extender.webhook", "extender.scheduler", "extender.cli"}
FORBIDDEN = HTTP | {"marshmallow", "prometheus_client", "extender.cluster", "extender.wire", "extender.metrics"}
# What a user writes (the policy file, plugin args, settings) is checked by marshmallow schemas when a
# policy loads, never per pod: the shared base and the modules that hold schemas may import it; the
# engine and the plugins' run-time code never do (plugins declare their args through arguments.py).
ALLOWED = {path: {"marshmallow"} for path in ("policy/schemas.py", "policy/loading.py", "policy/builtin/arguments.py")}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _bad(path: Path, forbidden: set[str]) -> set[str]:
    allowed = ALLOWED.get(str(path.relative_to(PACKAGE)), set())
    return {name for name in imported(path)
            if any(name == f or name.startswith(f + ".") for f in forbidden - allowed)}


@pytest.mark.parametrize("path", sorted([*PACKAGE.glob("model/*.py"), *PACKAGE.glob("policy/**/*.py"),
                                          *PACKAGE.glob("gangs/*.py"), *PACKAGE.glob("dra/**/*.py"),
                                          *PACKAGE.glob("cycle/*.py")]),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pure_layers_import_no_adapters(path: Path) -> None:
    bad = _bad(path, FORBIDDEN)
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("cluster/*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_cluster_state_speaks_to_no_api_server(path: Path) -> None:
    bad = _bad(path, HTTP | {"prometheus_client", "extender.metrics", "extender.wire"})
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_the_layer_tests_see_the_packages() -> None:
    """A renamed folder must not make the tests above pass on nothing."""
    assert len(list(PACKAGE.glob("cluster/*.py"))) > 5 and len(list(PACKAGE.glob("policy/builtin/*.py"))) > 10
    assert len(list(PACKAGE.glob("gangs/*.py"))) >= 4
    assert len(list(PACKAGE.glob("dra/**/*.py"))) >= 6
    assert len(list(PACKAGE.glob("cycle/*.py"))) >= 4


# The adapters' order (docs/architecture.md, "Layers"), top first. A module may import from its
# own unit and from any unit of a lower layer; never from a unit beside it or above it. The three
# modes sit side by side: what two of them share lives below them.
LAYERS: list[set[str]] = [
    {"__main__"},
    {"cli"},
    {"replay"},  # trace replay: simulate's placements, one pod at a time, measured as a curve
    {"webhook", "scheduler", "simulation"},  # the three modes, side by side
    {"explain"},  # why a pod goes where it goes: the view all three modes show
    {"startup"},  # the start-up checks, the policy holder a mode starts with, the collector's tuning
    {"checks"},  # what a configuration or the API server's permissions would break
    {"usage"},  # node usage: the metrics API reader and the load table it fills
    {"kube"},  # the API server: watches, binds, leases
    {"cluster", "wire"},  # the in-memory cluster state and binders; the extender wire format
    {"cycle"},  # the pure cycles: a pod's, a group's, the steps after a decision
    {"policy", "gangs"},  # the engine and its plugins; the gang coordinator
    {"dra"},  # the structured-parameters allocator and its CEL
    {"model"},  # the API objects, read once into views
    {"settings", "tls", "logs", "metrics"},  # what every layer may use
    {"errors", "__init__"},
]
LAYER_OF = {unit: index for index, units in enumerate(LAYERS) for unit in units}


def unit_of(path: Path) -> str:
    """The top-level module or package a file belongs to (the package's own __init__ is "__init__")."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def project_imports(path: Path) -> list[tuple[int, str]]:
    """Every `extender.*` import of the module, with its line: the ones inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("extender.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("extender"):
            if node.module == "extender":  # `from extender import metrics` (a module) or `__version__`
                found += [(node.lineno, f"extender.{alias.name}" if _is_module(alias.name) else "extender.__init__")
                          for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_layer() -> None:
    """A new package must be placed in LAYERS (and in docs/architecture.md) before it can land."""
    units = {unit_of(p) for p in MODULES}
    assert units - set(LAYER_OF) == set(), "not placed in LAYERS"
    assert set(LAYER_OF) - units == set(), "LAYERS names a unit that is gone"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_layers_only(path: Path) -> None:
    unit = unit_of(path)
    wrong = []
    for line, module in project_imports(path):
        target = module.split(".")[1]
        if target != unit and LAYER_OF.get(target, -1) <= LAYER_OF[unit]:
            side = "beside" if LAYER_OF.get(target) == LAYER_OF[unit] else "above"
            wrong.append(f"line {line}: {module} ({target} is {side} {unit})")
    assert not wrong, f"{path.relative_to(PACKAGE)}: " + "; ".join(wrong)


def test_the_order_check_fails_on_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above must be able to fail: a model module importing the webhook, and the
    scheduler importing the webhook beside it, are both caught."""
    package = tmp_path / "extender"
    (package / "model").mkdir(parents=True)
    (package / "scheduler").mkdir()
    (package / "webhook").mkdir()
    upward = package / "model" / "probe.py"
    upward.write_text("def late():\n    from extender.webhook.app import create_app\n")
    sideways = package / "scheduler" / "probe.py"
    sideways.write_text("from extender.webhook import verbs\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    for probe, word in ((upward, "above"), (sideways, "beside")):
        with pytest.raises(AssertionError, match=f"webhook is {word}"):
            test_imports_go_down_the_layers_only(probe)


def _in_function_imports(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text().splitlines()
    found = []
    for function in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                if module and module.startswith("extender"):
                    found.append((node.lineno, module))
    return found


def _explained(lines: list[str], line: int) -> bool:
    """A comment on the import's line, or on the lines just above it (up to the block's start)."""
    index = line - 1
    if "#" in lines[index]:
        return True
    index -= 1
    while index >= 0 and lines[index].strip().startswith(("from ", "import ")):
        index -= 1
    return index >= 0 and lines[index].strip().startswith("#")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_project_import_inside_a_function_says_why(path: Path) -> None:
    """Out of the import graph's sight, so each says why it is late (start-up cost, an optional
    dependency, a cycle broken on purpose) in a comment on its line or just above its block."""
    lines = path.read_text().splitlines()
    silent = [f"line {line}: {module}" for line, module in _in_function_imports(path) if not _explained(lines, line)]
    assert not silent, f"{path.relative_to(PACKAGE)}: " + "; ".join(silent)


PURE_MODULES = sorted(p for unit in ("model", "dra", "policy", "gangs", "cycle") for p in (PACKAGE / unit).rglob("*.py"))


def _imports_alone(path: Path) -> str:
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                            cwd=PACKAGE.parent, timeout=60)
    return "" if result.returncode == 0 else f"{module}: {result.stderr.strip().splitlines()[-1]}"


def test_each_pure_module_imports_first() -> None:
    """An import cycle hides as long as some other module happens to be imported first: each pure
    module is imported first, in a process of its own (policy.usage_settings once was not)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [failure for failure in pool.map(_imports_alone, PURE_MODULES) if failure]
    assert len(PURE_MODULES) > 60
    assert not failures, failures


def test_startup_imports_no_prometheus_client() -> None:
    """config/gunicorn.conf.py imports extender.startup (the TLS check) in gunicorn's master:
    prometheus_client must not be loaded there before the multiprocess directory is known."""
    probe = "import sys, extender.startup; assert 'prometheus_client' not in sys.modules, 'loaded'"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PACKAGE.parent,
                            timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_command_line_loads_no_client_until_a_command_runs() -> None:
    """`extender --help` (and every command's import) pays for neither the kubernetes client nor
    prometheus_client: cli/__init__.py's promise, kept by the commented late imports."""
    probe = ("import sys, extender.cli; heavy = {'kubernetes', 'prometheus_client'} & set(sys.modules); "
             "assert not heavy, sorted(heavy)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PACKAGE.parent,
                            timeout=60)
    assert result.returncode == 0, result.stderr
