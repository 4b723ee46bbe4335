"""The layering of DESIGN.md, enforced: model and the policy engine stay pure.

model <- policy <- wire, cluster <- webhook, scheduler <- cli. The engine imports no
HTTP framework, no Kubernetes client and no schema library, so the webhook, the
standalone scheduler and simulate can only differ in their adapters.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "extender"
FORBIDDEN = {"flask", "werkzeug", "gunicorn", "kubernetes", "urllib3", "marshmallow", "prometheus_client",
             "extender.webhook", "extender.cluster", "extender.scheduler", "extender.cli", "extender.wire",
             "extender.runtime", "extender.metrics"}
# The policy file loader is the one place in policy/ that reads YAML through marshmallow (issue: "validated
# with marshmallow"); the engine itself never imports it.
ALLOWED = {"policy/loading.py": {"marshmallow"}}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted([*PACKAGE.glob("model/*.py"), *PACKAGE.glob("policy/**/*.py")]),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pure_layers_import_no_adapters(path: Path) -> None:
    allowed = ALLOWED.get(str(path.relative_to(PACKAGE)), set())
    bad = {name for name in imported(path)
           if any(name == f or name.startswith(f + ".") for f in FORBIDDEN - allowed)}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
