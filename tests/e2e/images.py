"""The container images a local node runs, built here (no registry is reachable) and cached.

Three images, each an OCI archive that ``ctr images import`` loads into the node's containerd:

- ``registry.k8s.io/pause:3.10``, the sandbox image: a static Go program that waits for a
  signal (``CGO_ENABLED=0``), alone in a one-layer image, user 65535;
- ``registry.k8s.io/kube-scheduler:v1.36.3``, the chart's second kube-scheduler: the binary
  ``../shared/tools/k8s-test-binaries.sh`` built, at ``/usr/local/bin/kube-scheduler``;
- the product image, built by ``make image`` (buildah here) and pushed to an archive.

The first two are written directly as OCI image layouts (a layer tar, a config, a manifest,
an index): no builder is needed, and the same inputs give the same bytes. Every archive is
cached under ``~/.cache/extender-e2e/images`` by a key over what goes into it (the Go source
and go version; the binary's hash; for the product image the Dockerfile, pyproject.toml,
extender/ and config/ files and the base image's id), so a second run imports without
building. Nothing here imports pytest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "extender-e2e" / "images"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.36.3"
#: The product image's local name (the README's "Trying it on a local node" installs it).
PRODUCT_IMAGE = "localhost/scheduler-extender:0.1.0"
#: The stand-in Python base ../shared/tools/container-base.sh builds (no python:3.11-slim here).
BASE_IMAGE = "localhost/extender-base:bookworm"
BUILDAH = ["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs")]

PAUSE_SOURCE = """\
// pause: the pod sandbox's process. It holds the pod's namespaces and exits on a signal.
package main

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tc := make(chan os.Signal, 1)
\tsignal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
\t<-c
}
"""


@dataclass(frozen=True)
class Archive:
    """An image archive on disk and the name it carries."""

    name: str
    path: Path
    built: bool  # False: taken from the cache

    def config(self) -> dict[str, Any]:
        """The image's configuration (``Entrypoint``, ``Cmd``, ``User``, ...), read from the
        archive's OCI layout: index, manifest, config blob."""
        with tarfile.open(self.path) as archive:
            def blob(digest: str) -> dict[str, Any]:
                member = archive.extractfile(f"blobs/{digest.replace(':', '/')}")
                assert member is not None, f"{self.path}: no blob {digest}"
                return dict(json.loads(member.read()))

            index = archive.extractfile("index.json")
            assert index is not None, f"{self.path}: no index.json"
            manifest = blob(json.loads(index.read())["manifests"][0]["digest"])
            return dict(blob(manifest["config"]["digest"]).get("config") or {})


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key(parts: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def _cached(stem: str, key: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE / f"{stem}-{key}.oci.tar"


def _prune(stem: str, keep: Path) -> None:
    """Drop older archives of the same image (one per key would pile up)."""
    for old in CACHE.glob(f"{stem}-*.oci.tar"):
        if old != keep:
            old.unlink(missing_ok=True)


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def write_oci_archive(path: Path, name: str, files: dict[str, tuple[bytes, int]], *,
                      entrypoint: list[str], user: str) -> None:
    """A one-layer OCI image layout as a tar (``ctr images import`` reads it): ``files`` maps
    a path in the image to (content, mode)."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        dirs = sorted({str(Path(p).parent) for p in files} - {"."})
        for directory in dirs:
            parts = Path(directory).parts
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in layer.getnames():
                    info = tarfile.TarInfo(sub)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    layer.addfile(info)
        for file_path, (data, mode) in sorted(files.items()):
            _tar_add(layer, file_path, data, mode)
    diff = layer_buf.getvalue()
    blob = gzip.compress(diff, mtime=0)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": user, "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_sha256(diff)}"]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{_sha256(config)}", "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": f"sha256:{_sha256(blob)}", "size": len(blob)}],
    }, sort_keys=True).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": f"sha256:{_sha256(manifest)}", "size": len(manifest),
                       "annotations": {"io.containerd.image.name": name,
                                       "org.opencontainers.image.ref.name": name}}],
    }, sort_keys=True).encode()
    partial = path.with_suffix(".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as archive:
        _tar_add(archive, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _tar_add(archive, "index.json", index)
        for blob_data in (config, manifest, blob):
            _tar_add(archive, f"blobs/sha256/{_sha256(blob_data)}", blob_data)
    partial.rename(path)


def pause_image() -> Archive:
    """The sandbox image, from a tiny static Go program (needs go)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout
    path = _cached("pause", _key([PAUSE_SOURCE.encode(), version.encode()]))
    if path.exists():
        return Archive(PAUSE_IMAGE, path, built=False)
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "main.go").write_text(PAUSE_SOURCE)
        env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GO111MODULE": "off"}
        subprocess.run([go, "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", "main.go"], cwd=work,
                       env=env, check=True, capture_output=True, timeout=300)  # fmt: skip
        binary = (Path(work) / "pause").read_bytes()
    write_oci_archive(path, PAUSE_IMAGE, {"pause": (binary, 0o755)}, entrypoint=["/pause"], user="65535:65535")
    _prune("pause", path)
    return Archive(PAUSE_IMAGE, path, built=True)


def kube_scheduler_image(binary: Path) -> Archive:
    """kube-scheduler from the built binary (static), where the chart's Deployment runs it."""
    data = binary.read_bytes()
    path = _cached("kube-scheduler", _key([data]))
    if path.exists():
        return Archive(KUBE_SCHEDULER_IMAGE, path, built=False)
    write_oci_archive(path, KUBE_SCHEDULER_IMAGE, {"usr/local/bin/kube-scheduler": (data, 0o755)},
                      entrypoint=["/usr/local/bin/kube-scheduler"], user="65532:65532")  # fmt: skip
    _prune("kube-scheduler", path)
    return Archive(KUBE_SCHEDULER_IMAGE, path, built=True)


def product_sources() -> list[Path]:
    """What ``make image`` copies into the image (the Dockerfile's COPY lines)."""
    files = [ROOT / "Dockerfile", ROOT / "pyproject.toml"]
    for folder in ("extender", "config"):
        files += sorted(p for p in (ROOT / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    return files


def _base_image_id(base: str) -> str:
    result = subprocess.run([*BUILDAH, "inspect", "--type", "image", "--format", "{{.FromImageID}}", base],
                            capture_output=True, text=True, check=False)  # fmt: skip
    return result.stdout.strip() if result.returncode == 0 else ""


def product_image(base: str = BASE_IMAGE, image: str = PRODUCT_IMAGE, log: Path | None = None) -> Archive:
    """The product image: ``make image`` (buildah) when its sources changed, else the cache.

    ``base`` is made by ../shared/tools/container-base.sh when missing (a few minutes, once)."""
    if not _base_image_id(base):
        script = ROOT.parent / "shared" / "tools" / "container-base.sh"
        if not script.exists():
            raise FileNotFoundError(f"no base image {base} and no {script} to build one")
        subprocess.run(["bash", str(script), base], check=True, capture_output=True, timeout=900)
    base_id = _base_image_id(base)
    key = _key([base_id.encode(), image.encode(),
                *(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() for p in product_sources())])
    path = _cached("scheduler-extender", key)
    if path.exists():
        return Archive(image, path, built=False)
    log = log or CACHE / "make-image.log"
    started = time.monotonic()
    with open(log, "w") as out:
        subprocess.run(["make", "-C", str(ROOT), "image", f"IMAGE={image}", f"PYTHON_IMAGE={base}"],
                       stdout=out, stderr=subprocess.STDOUT, check=True, timeout=1200)  # fmt: skip
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        subprocess.run([*BUILDAH, "push", image, f"oci-archive:{partial}:{image}"],
                       stdout=out, stderr=subprocess.STDOUT, check=True, timeout=600)  # fmt: skip
        partial.rename(path)
        out.write(f"built and archived in {time.monotonic() - started:.0f}s\n")
    _prune("scheduler-extender", path)
    return Archive(image, path, built=True)
