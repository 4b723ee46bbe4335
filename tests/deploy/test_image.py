"""The image, built with `make image` and run: what test_dockerfile.py can only read.

One build per module (about a minute from a warm layer cache, more from a cold one), on the
base named by $PYTHON_IMAGE, else the local stand-in ../shared/tools/container-base.sh makes
when it exists, else python:3.11-slim. Containers run with a read-only root filesystem and a
tmpfs on /tmp, as deploy/ runs them: with docker or podman (`--read-only`), or with buildah's
storage and a private mount namespace (the image's root bind-mounted read-only, then chroot
as the image's user), which needs root and util-linux's unshare.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from extender import __version__
from tests.helpers import free_port

from . import ROOT

pytestmark = pytest.mark.slow

TAG = "localhost/scheduler-extender:test"
STAND_IN = "localhost/extender-base:bookworm"
BUILDAH = ["buildah", "--storage-driver", "vfs"]
WIRE = ROOT / "tests" / "fixtures" / "wire"


def _works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def builder() -> str | None:
    """The tool `make image` picks: docker when its daemon answers, else podman, else buildah."""
    if shutil.which("docker") and _works(["docker", "info"]):
        return "docker"
    for tool in ("podman", "buildah"):
        if shutil.which(tool):
            return tool
    return None


def _base(tool: str) -> str | None:
    """$PYTHON_IMAGE, else the local stand-in, else (docker only) the public base, which docker pulls;
    None when none is at hand: buildah and podman are used here on machines that reach no registry."""
    if os.environ.get("PYTHON_IMAGE"):
        return os.environ["PYTHON_IMAGE"]
    inspect = [*BUILDAH, "inspect", "--type", "image"] if tool == "buildah" else [tool, "image", "inspect"]
    if _works([*inspect, STAND_IN]):
        return STAND_IN
    return "python:3.11-slim" if tool == "docker" else None


class Engine:
    """Runs the image with docker or podman: their own read-only root and tmpfs."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def argv(self, args: list[str], entrypoint: str | None = None) -> list[str]:
        extra = ["--entrypoint", entrypoint] if entrypoint else []
        return [self.tool, "run", "--rm", "--read-only", "--tmpfs", "/tmp", "--network", "host", *extra, TAG, *args]

    def uid(self) -> str:
        return subprocess.run(self.argv(["-u"], entrypoint="id"), capture_output=True, text=True,
                              timeout=120, check=True).stdout.strip()

    def close(self) -> None:
        """docker and podman remove each container on exit (--rm)."""


class ChrootRunner:
    """Runs the image from buildah's storage as a runtime would: the image's user, environment,
    working directory and entry point, its root read-only, a tmpfs on /tmp."""

    SCRIPT = ('set -e; r="$1"; shift; mount --bind "$r" "$r"; mount -o remount,bind,ro "$r"; '
              'mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"; mount --rbind /dev "$r/dev"; '
              'mount -t proc proc "$r/proc"; exec chroot --userspec="$1" "$r" /usr/bin/env -i "${@:2}"')

    def __init__(self) -> None:
        if not shutil.which("unshare") or not _works(["unshare", "--mount", "true"]):
            pytest.skip("buildah's containers run here through `unshare --mount` and chroot, "
                        "which need root and util-linux; neither docker nor podman is available")
        self.container = subprocess.run([*BUILDAH, "from", TAG], capture_output=True, text=True, timeout=300,
                                        check=True).stdout.strip()
        self.root = subprocess.run([*BUILDAH, "mount", self.container], capture_output=True, text=True,
                                   timeout=60, check=True).stdout.strip()
        info = json.loads(subprocess.run([*BUILDAH, "inspect", "--type", "image", TAG], capture_output=True,
                                         text=True, timeout=60, check=True).stdout)
        self.config = info["OCIv1"]["config"]

    def argv(self, args: list[str], entrypoint: str | None = None) -> list[str]:
        command = [entrypoint] if entrypoint else list(self.config["Entrypoint"])
        workdir = self.config.get("WorkingDir") or "/"
        return ["unshare", "--mount", "--propagation", "private", "bash", "-c", self.SCRIPT, "bash", self.root,
                self.config["User"], *self.config["Env"],
                "sh", "-c", 'cd "$0" && exec "$@"', workdir, *command, *args]

    def uid(self) -> str:
        """Asked of `buildah run`, which applies the image's USER itself (not through our chroot)."""
        return subprocess.run([*BUILDAH, "run", "--isolation", "chroot", self.container, "--", "id", "-u"],
                              capture_output=True, text=True, timeout=120, check=True).stdout.strip()

    def close(self) -> None:
        subprocess.run([*BUILDAH, "rm", self.container], capture_output=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def image() -> Iterator[Any]:
    tool = builder()
    if tool is None:
        pytest.skip("no container builder: docker with a running daemon, podman or buildah "
                    "(apt-get install -y buildah)")
    if not shutil.which("make"):
        pytest.skip("the image is built with `make image`, and make is not installed")
    base = _base(tool)
    if base is None:
        pytest.skip(f"no base image for {tool}: set PYTHON_IMAGE, or run ../shared/tools/container-base.sh once "
                    f"to make the local stand-in {STAND_IN}")
    started = time.monotonic()
    build = subprocess.run(["make", "-s", "image", f"IMAGE={TAG}", f"PYTHON_IMAGE={base}"], cwd=ROOT,
                           capture_output=True, text=True, timeout=1800, check=False)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    print(f"\nmake image with {tool} on {base}: {time.monotonic() - started:.0f} s")
    runner = ChrootRunner() if tool == "buildah" else Engine(tool)
    yield runner
    runner.close()


def _run(image: Any, args: list[str], entrypoint: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(image.argv(args, entrypoint), capture_output=True, text=True, timeout=300, check=False)


def test_runs_as_uid_65532(image: Any) -> None:
    assert image.uid() == "65532"


def test_version(image: Any) -> None:
    result = _run(image, ["--version"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"extender, version {__version__}"


def test_root_filesystem_is_read_only_and_tmp_is_writable(image: Any) -> None:
    """The runner really runs read-only (else the serve test below would prove nothing)."""
    result = _run(image, ["-c", "touch /app/probe"], entrypoint="sh")
    assert result.returncode != 0 and "Read-only file system" in result.stderr, result.stderr
    result = _run(image, ["-c", "touch /tmp/probe && echo ok"], entrypoint="sh")
    assert result.stdout.strip() == "ok", result.stderr


def test_check_passes_the_shipped_configuration(image: Any) -> None:
    policies = sorted(p.name for p in (ROOT / "config").glob("policy*.yaml"))
    configs = sorted(p.name for p in (ROOT / "config").glob("kube-scheduler*.yaml"))
    assert policies and configs
    for policy in policies:
        result = _run(image, ["check", "--policy", f"/app/config/{policy}"])
        assert result.returncode == 0, (policy, result.stdout, result.stderr)
    args = [arg for name in configs for arg in ("--scheduler-config", f"/app/config/{name}")]
    result = _run(image, ["check", *args])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def served(image: Any) -> Iterator[int]:
    """The image's own CMD (the webhook on its default policy), on a free loopback port."""
    port = free_port()
    cmd = ["serve", "--bind", f"127.0.0.1:{port}", "--policy", "/app/config/policy-webhook.yaml"]
    process = subprocess.Popen(image.argv(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline, "the image's webhook never became ready"
                time.sleep(0.5)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _post(port: int, verb: str, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/{verb}", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, json.loads(reply.read())


def test_serve_answers_readyz_and_a_captured_filter_call(served: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{served}/readyz", timeout=5) as reply:
        ready = json.loads(reply.read())
    assert ready["ready"] is True and ready["source"] == "snapshot" and ready["nodes"] > 0
    status, reply = _post(served, "filter", (WIRE / "filter-request.json").read_bytes())
    sent = json.loads((WIRE / "filter-request.json").read_text())["NodeNames"]
    assert status == 200 and reply["Error"] == ""
    assert reply["NodeNames"] and set(reply["NodeNames"]) <= set(sent)
    assert set(reply["NodeNames"]) | set(reply["FailedNodes"]) | set(reply["FailedAndUnresolvableNodes"]) == set(sent)
