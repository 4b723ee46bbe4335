"""The map stays true: every module a document or a package docstring names exists.

docs/*.md and README.md name files (`policy/engine.py`, `extender/kube/source.py`, a bare
`verbs.py` in a table of one package's files) and modules (`extender.policy.names`); a
package docstring lists its modules, as `name (what it does)` items or as `name` in
backticks (unless the package defines that name or uses it as a string: a term of its domain,
not a module). A rename that forgets one of them fails here, naming the document and the path.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "extender"
EXAMPLE = ROOT / "examples" / "plugin" / "src"  # the example plugin package's files
DOCUMENTS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

# A file path ending in .py (not a URL, not inside a word): `policy/engine.py`, extender/kube/x.py.
_PY_PATH = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[A-Za-z_][\w]*\.py)\b")
# A dotted module of this package: `extender.policy.names`.
# (Two parts may be a logger's or an entry-point group's name: `extender.access`, `extender.plugins`.)
_DOTTED = re.compile(r"`(extender(?:\.[a-z_][a-z0-9_]*){2,})`")
# In a package docstring: a list item `name (what it does)` (first, or after ", ", "; ",
# "and ", "or "), or a bare lower-case name in backticks.
_ITEM = re.compile(r"(?:^|, |; |\band |\bor )([a-z][a-z0-9_]*)\s+\(", re.MULTILINE)
_TICKED = re.compile(r"`([a-z][a-z0-9_]*)`")
_BASENAMES = {path.name for path in ROOT.rglob("*.py") if ".venv" not in path.parts}


def _exists(name: str, *bases: Path) -> bool:
    return any((base / name).exists() for base in bases)


def _file_exists(path: str, document: Path) -> bool:
    """Relative to the repository, to the package (`policy/engine.py`), to the document, or,
    for a bare file name in a table of one package's files, anywhere in the tree."""
    if _exists(path, ROOT, PACKAGE, document.parent, EXAMPLE):
        return True
    return "/" not in path and path in _BASENAMES


def _terms(module: Path) -> set[str]:
    """The identifier-like strings a module uses (`device`, a CEL variable): terms, not modules."""
    return {node.value for node in ast.walk(ast.parse(module.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier()}


def _top_level_names(module: Path) -> set[str]:
    """What a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _module_exists(dotted: str) -> bool:
    """A module or package, or a name a module defines (`extender.policy.builtin.register`)."""
    path = ROOT.joinpath(*dotted.split("."))
    if path.with_suffix(".py").exists() or (path / "__init__.py").exists():
        return True
    parent = path.parent.with_suffix(".py")
    if not parent.exists():
        parent = path.parent / "__init__.py"
    return parent.exists() and path.name in _top_level_names(parent)


def _missing_in_text(text: str, where: Path) -> list[str]:
    missing = [path for path in _PY_PATH.findall(text) if not _file_exists(path, where)]
    missing += [dotted for dotted in _DOTTED.findall(text) if not _module_exists(dotted)]
    return missing


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_document_names_exists(document: Path) -> None:
    assert _missing_in_text(document.read_text(), document) == []


_PACKAGES = sorted(PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("init", _PACKAGES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_module_a_package_docstring_names_exists(init: Path) -> None:
    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    package = init.parent
    missing = _missing_in_text(docstring, init)
    named = set(_ITEM.findall(docstring)) | set(_TICKED.findall(docstring))
    modules = list(package.glob("*.py"))
    defined = set().union(*(_top_level_names(module) | _terms(module) for module in modules))
    missing += sorted(name for name in named - defined
                      if not _exists(f"{name}.py", package) and not _exists(name, package))
    assert missing == []


def test_the_checks_catch_a_missing_module() -> None:
    """The test above must be able to fail: a stale name in each form is reported."""
    docstring = "queueing (which pod next), cycle (one decision) and `binding`; see policy/nowhere.py."
    named = set(_ITEM.findall(docstring)) | set(_TICKED.findall(docstring))
    assert named == {"queueing", "cycle", "binding"}
    assert _missing_in_text(docstring, PACKAGE / "scheduler" / "__init__.py") == ["policy/nowhere.py"]
    assert not _module_exists("extender.policy.nowhere") and _module_exists("extender.policy.names")
