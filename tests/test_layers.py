"""The layering of docs/architecture.md, enforced: model, the policy engine, the gang coordinator, the DRA
allocator and the cluster state stay pure.

model <- policy <- cluster <- kube, wire <- webhook, scheduler <- cli. The engine imports no
HTTP framework, no Kubernetes client and no schema library, so the webhook, the
standalone scheduler and simulate can only differ in their adapters; the cluster state
speaks to no API server (that is extender/kube), so simulate runs it with no network.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "extender"
HTTP = {"flask", "werkzeug", "gunicorn", "kubernetes", "urllib3", "http", "socket", "ssl", "requests",
        "extender.kube", "extender.webhook", "extender.scheduler", "extender.cli", "extender.runtime"}
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
                                          *PACKAGE.glob("gangs/*.py"), *PACKAGE.glob("dra/**/*.py")]),
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
