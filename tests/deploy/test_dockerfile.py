"""The Dockerfile, read statically (there is no Docker engine here to build it).

A small parser (continuations, comments, exec and shell forms) is enough to check
the properties that matter: two stages from python:3.11-slim, a final stage that
only copies the virtualenv and config/ and runs as a numeric non-root user, the
entry point, the port, a health check that works without curl, and COPY sources
that exist and are not hidden by .dockerignore.
"""

from __future__ import annotations

import http.server
import json
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from . import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Instruction:
    keyword: str
    rest: str
    stage: int  # index of the FROM it belongs to (-1: before the first FROM)
    flags: dict[str, str] = field(default_factory=dict)

    def exec_form(self) -> list[str]:
        value = json.loads(self.rest)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value)
        return value


def parse(text: str) -> list[Instruction]:
    """Instructions with comments dropped and continuation lines joined, as BuildKit reads them."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        if raw.strip().startswith("#"):
            continue  # comments (and parser directives), also inside a continuation
        if not current and not raw.strip():
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        logical.append(current.strip())
        current = ""
    assert not current, "Dockerfile ends inside a continuation"
    instructions: list[Instruction] = []
    stage = -1
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "FROM":
            stage += 1
        flags: dict[str, str] = {}
        if keyword in ("COPY", "ADD", "RUN", "HEALTHCHECK"):
            while rest.startswith("--"):
                flag, _, rest = rest.partition(" ")
                name, _, value = flag[2:].partition("=")
                flags[name] = value
                rest = rest.strip()
        instructions.append(Instruction(keyword, rest, stage, flags))
    return instructions


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse(DOCKERFILE.read_text())


def _args(instructions: list[Instruction]) -> dict[str, str]:
    """Global ARG defaults (before the first FROM), for ${NAME} in FROM lines."""
    values = {}
    for ins in instructions:
        if ins.keyword == "ARG" and ins.stage == -1 and "=" in ins.rest:
            name, _, value = ins.rest.partition("=")
            values[name] = value
    return values


def _stages(instructions: list[Instruction]) -> list[tuple[str, str]]:
    """(image, alias) of every FROM, ARGs substituted."""
    args = _args(instructions)
    stages = []
    for ins in instructions:
        if ins.keyword != "FROM":
            continue
        words = ins.rest.split()
        image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], words[0])
        alias = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
        stages.append((image, alias))
    return stages


def _final(instructions: list[Instruction]) -> list[Instruction]:
    last = max(ins.stage for ins in instructions)
    return [ins for ins in instructions if ins.stage == last]


def _last(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [ins for ins in _final(instructions) if ins.keyword == keyword]
    assert found, f"no {keyword} in the final stage"
    return found[-1]


# --- stages ----------------------------------------------------------------------------


def test_multi_stage_from_python_slim(instructions: list[Instruction]) -> None:
    stages = _stages(instructions)
    assert len(stages) >= 2
    assert {image for image, _ in stages} == {"python:3.11-slim"}
    assert stages[0][1] == "builder"


def test_final_stage_copies_only_the_venv_and_config(instructions: list[Instruction]) -> None:
    copies = [ins for ins in _final(instructions) if ins.keyword in ("COPY", "ADD")]
    assert all(ins.keyword == "COPY" for ins in copies), "ADD fetches and unpacks; COPY is enough"
    from_builder = [shlex.split(ins.rest) for ins in copies if ins.flags.get("from") == "builder"]
    assert from_builder == [["/opt/venv", "/opt/venv"], ["/usr/bin/tini-static", "/usr/local/bin/tini"]]
    from_context = [shlex.split(ins.rest)[:-1] for ins in copies if "from" not in ins.flags]
    assert from_context == [["config/"]]


def test_no_build_tools_in_the_final_stage(instructions: list[Instruction]) -> None:
    runs = " ".join(ins.rest for ins in _final(instructions) if ins.keyword == "RUN")
    for tool in ("pip", "apt-get", "apt ", "gcc", "make", "build-essential", "curl", "wget"):
        assert tool not in runs, f"final stage runs {tool}"
    builder_runs = " ".join(
        ins.rest for ins in instructions if ins.keyword == "RUN" and ins.stage == 0
    )
    assert "pip uninstall --yes pip setuptools wheel" in builder_runs, (
        "the copied venv carries no pip"
    )


def test_runs_as_numeric_non_root_user(instructions: list[Instruction]) -> None:
    final = _final(instructions)
    user = _last(instructions, "USER")
    uid, _, gid = user.rest.partition(":")
    assert uid.isdigit() and int(uid) != 0, "numeric, so runAsNonRoot can verify it"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    assert final.index(user) > max(
        i for i, ins in enumerate(final) if ins.keyword in ("RUN", "COPY")
    )


def test_entrypoint_and_cmd_run_the_webhook(instructions: list[Instruction]) -> None:
    # tini as PID 1 (a PID 1 without a handler drops SIGTERM; extender has none while it imports).
    assert _last(instructions, "ENTRYPOINT").exec_form() == ["tini", "-s", "--", "extender"]
    builder_runs = " ".join(ins.rest for ins in instructions if ins.keyword == "RUN" and ins.stage == 0)
    assert "apt-get install" in builder_runs and " tini" in builder_runs, "tini comes from the builder stage"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "extender" in scripts
    cmd = _last(instructions, "CMD").exec_form()
    assert cmd[:3] == ["serve", "--bind", "0.0.0.0:8888"]
    workdir = _last(instructions, "WORKDIR").rest
    if "--policy" in cmd:
        policy = cmd[cmd.index("--policy") + 1]
        assert policy.startswith(f"{workdir}/config/")
        assert (ROOT / "config" / policy.removeprefix(f"{workdir}/config/")).is_file(), policy


def test_config_dir_points_at_the_copied_config(instructions: list[Instruction]) -> None:
    workdir = _last(instructions, "WORKDIR").rest
    envs = " ".join(ins.rest for ins in _final(instructions) if ins.keyword == "ENV")
    assert f"EXTENDER_CONFIG_DIR={workdir}/config" in envs
    assert (ROOT / "config" / "gunicorn.conf.py").is_file()


def test_exposes_the_webhook_port(instructions: list[Instruction]) -> None:
    exposed = [ins.rest for ins in _final(instructions) if ins.keyword == "EXPOSE"]
    assert exposed == ["8888"]


# --- health check ----------------------------------------------------------------------


def _healthcheck_command(instructions: list[Instruction]) -> list[str]:
    check = _last(instructions, "HEALTHCHECK")
    assert check.rest.startswith("CMD ")
    command = json.loads(check.rest.removeprefix("CMD "))
    assert command[:2] == ["python", "-c"], "slim has no curl: Python asks"
    return command


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_healthcheck_hits_healthz(instructions: list[Instruction], health_server: int) -> None:
    command = _healthcheck_command(instructions)
    assert "/healthz" in command[2] and "8888" in command[2]

    def check(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", command[2]],
            env={"EXTENDER_HEALTHCHECK_URL": f"http://127.0.0.1:{health_server}{path}"},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    ok = check("/healthz")
    assert ok.returncode == 0, ok.stderr
    assert check("/nope").returncode == 1


# --- build context ---------------------------------------------------------------------


def _ignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """(is_exception, regex) per .dockerignore line, with Docker's matching rules."""
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:].strip() if negate else line
        pattern = pattern.strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif pattern.startswith("**", i):
                regex += ".*"
                i += 2
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex += pattern[i : end + 1]
                i = end + 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        patterns.append((negate, re.compile(f"^{regex}$")))
    return patterns


def excluded(relative: str) -> bool:
    """Whether .dockerignore keeps `relative` (a path in the repo) out of the context.

    A pattern matches a path or any of its parent directories; the last matching
    pattern wins, and `!` patterns re-include.
    """
    parts = relative.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for negate, regex in _ignore_patterns():
        if any(regex.match(candidate) for candidate in candidates):
            result = not negate
    return result


def test_dockerignore_matcher() -> None:
    assert excluded(".git/config")
    assert excluded(".venv/bin/python")
    assert excluded("extender/__pycache__/x.cpython-311.pyc")
    assert excluded("extender.egg-info/PKG-INFO")
    assert excluded("tests/deploy/test_dockerfile.py")
    assert not excluded("extender/cli/check.py")
    assert not excluded("config/policy.yaml")
    assert not excluded("pyproject.toml")


def _context_sources(instructions: list[Instruction]) -> list[str]:
    sources = []
    for ins in instructions:
        if ins.keyword in ("COPY", "ADD") and "from" not in ins.flags:
            words = ins.exec_form() if ins.rest.startswith("[") else shlex.split(ins.rest)
            sources += words[:-1]
    return sources


def test_copy_sources_exist_and_are_in_the_context(instructions: list[Instruction]) -> None:
    sources = _context_sources(instructions)
    assert {"pyproject.toml", "extender/", "config/"} <= set(sources)
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: not in the repository"
        assert not excluded(source), f"COPY {source}: excluded by .dockerignore"
        if path.is_dir():
            for file in path.rglob("*"):
                relative = file.relative_to(ROOT).as_posix()
                if file.is_file() and "__pycache__" not in relative:
                    assert not excluded(relative), (
                        f"{relative} is needed but .dockerignore drops it"
                    )


def test_dependency_install_reads_pyproject(instructions: list[Instruction]) -> None:
    """The builder installs dependencies with a python one-liner over pyproject.toml."""
    runs = " ".join(ins.rest for ins in instructions if ins.keyword == "RUN" and ins.stage == 0)
    match = re.search(r"\$\(python -c '([^']*)'\)", runs)
    assert match, "dependency install step not found"
    result = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert result.stdout.split() == declared


def test_dockerignore_keeps_local_state_out() -> None:
    for path in (
        ".git/HEAD",
        ".venv/pyvenv.cfg",
        ".pytest_cache/x",
        "tests/conftest.py",
        "a/b.pyc",
    ):
        assert excluded(path), path
