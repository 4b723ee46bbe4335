"""extender.tls without a server: the hardened context and the reload cache."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from extender import tls
from tests.helpers import Clock
from tests.security.certs import PKI, SecretVolume, issue


def test_context_is_hardened(pki: PKI, tmp_path: Path) -> None:
    cert, key = pki.server.write(tmp_path, "server")
    context = tls.build_context(tls.TLSFiles(str(cert), str(key), str(pki.ca_file)))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.options & ssl.OP_NO_RENEGOTIATION and context.options & ssl.OP_NO_COMPRESSION
    assert len(context.get_ca_certs()) == 1
    without_ca = tls.build_context(tls.TLSFiles(str(cert), str(key)))
    assert without_ca.verify_mode == ssl.CERT_NONE and without_ca.minimum_version == ssl.TLSVersion.TLSv1_2


def test_harden_raises_a_lower_minimum_and_keeps_a_higher_one() -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    assert tls.harden(context, require_client_cert=True).minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    assert tls.harden(context, require_client_cert=False).minimum_version == ssl.TLSVersion.TLSv1_3


def test_bad_files_are_named(pki: PKI, tmp_path: Path) -> None:
    cert, _ = pki.server.write(tmp_path, "server")
    _, other_key = pki.client.write(tmp_path, "client")
    with pytest.raises(tls.TLSConfigError, match="KEY_VALUES_MISMATCH|key values mismatch") as err:
        tls.check_files(str(cert), str(other_key))
    assert str(cert) in str(err.value)
    with pytest.raises(tls.TLSConfigError, match="No such file"):
        tls.check_files(str(tmp_path / "missing.crt"), str(other_key))


def test_certificate_info(pki: PKI, tmp_path: Path) -> None:
    cert, _ = pki.server.write(tmp_path, "server")
    info = tls.certificate_info(str(cert))
    assert int(info["serial"], 16) == pki.server.serial
    assert info["not_after"] == pytest.approx(pki.server.cert.not_valid_after_utc.timestamp(), abs=1)


def _cache(volume: SecretVolume, clock: Clock, interval: float = 1.0) -> tls.ContextCache:
    files = tls.TLSFiles(str(volume.path("tls.crt")), str(volume.path("tls.key")), str(volume.path("ca.crt")))
    return tls.ContextCache(files, interval=interval, clock=clock, record_metrics=False)


def test_one_context_until_the_files_change(pki: PKI, tmp_path: Path) -> None:
    volume, clock = SecretVolume(tmp_path / "secret"), Clock(1000.0)
    volume.put(pki.server, pki.ca)
    cache = _cache(volume, clock)
    first = cache.get()
    for _ in range(100):  # connections within the interval: no stat, no build
        assert cache.get() is first
    assert (cache.builds, cache.checks) == (1, 1)
    clock.now += 5  # interval over, files unchanged: one stat round, same context
    assert cache.get() is first and (cache.builds, cache.checks) == (1, 2)

    renewed = issue(pki.ca, "extender-webhook", server=True)
    volume.put(renewed, pki.ca)  # the ..data swap, as the kubelet does it
    assert cache.get() is first  # not yet: the interval has not passed
    clock.now += 1
    second = cache.get()
    assert second is not first and cache.builds == 2
    assert int(cache.info["serial"], 16) == renewed.serial


def test_a_bad_version_never_replaces_a_good_one(pki: PKI, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    volume, clock = SecretVolume(tmp_path / "secret"), Clock(1000.0)
    volume.put(pki.server, pki.ca)
    cache = _cache(volume, clock)
    good = cache.get()
    renewed = issue(pki.ca, "extender-webhook", server=True)
    volume.put(renewed, pki.ca, key=pki.client)  # certificate and key do not match
    for _ in range(3):
        clock.now += 2
        assert cache.get() is good
    assert cache.builds == 1
    assert sum("still serving the previous certificate" in r.getMessage() for r in caplog.records) == 1
    volume.put(renewed, pki.ca)  # fixed
    clock.now += 2
    assert cache.get() is not good and int(cache.info["serial"], 16) == renewed.serial


def test_in_place_rewrite_is_seen(pki: PKI, tmp_path: Path) -> None:
    """Not every writer swaps symlinks: a plain rewrite of the same path also triggers a rebuild."""
    clock = Clock(1000.0)
    cert, key = pki.server.write(tmp_path, "server")
    cache = tls.ContextCache(tls.TLSFiles(str(cert), str(key)), interval=0, clock=clock, record_metrics=False)
    first = cache.get()
    renewed = issue(pki.ca, "extender-webhook", server=True, key=pki.server.key)
    cert.write_bytes(renewed.cert_pem())
    assert cache.get() is not first and int(cache.info["serial"], 16) == renewed.serial


def test_no_usable_files_at_all_fails_the_connection(pki: PKI, tmp_path: Path) -> None:
    clock = Clock(1000.0)
    cert, _ = pki.server.write(tmp_path, "server")
    _, wrong_key = pki.client.write(tmp_path, "client")
    cache = tls.ContextCache(tls.TLSFiles(str(cert), str(wrong_key)), clock=clock, record_metrics=False)
    with pytest.raises(tls.TLSConfigError):
        cache.get()
    clock.now += 2
    with pytest.raises(tls.TLSConfigError, match="still unusable"):
        cache.get()  # the same bad version is not parsed again


def test_importing_tls_loads_no_prometheus_client() -> None:
    """config/gunicorn.conf.py imports extender.tls in the master before it sets up the metrics
    directory; prometheus_client picks single- or multi-process mode when first imported."""
    import subprocess
    import sys

    code = "import sys, extender.tls; assert 'prometheus_client' not in sys.modules, 'imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
