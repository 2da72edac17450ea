"""The lean kubeconfig reader (``ksched.client.kubeconfig``) agrees with the official loader on
every kubeconfig it accepts, and hands everything else to it."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched.client import kubeconfig as lean
from ksched.client.rest import load_client_configuration, pool_manager

CA = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n"


def b64(b: bytes) -> str:
    return base64.standard_b64encode(b).decode()


def kubeconfig(tmp: Path, cluster: dict[str, Any], user: dict[str, Any] | None, *, extra_contexts: int = 0,
               current: str | None = "main", name: str = "kubeconfig") -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "users": [{"name": "u", "user": user}] if user is not None else [],
    }
    for i in range(extra_contexts):
        doc["clusters"].append({"name": f"c{i}", "cluster": {"server": f"http://other-{i}:8080"}})
        doc["contexts"].append({"name": f"ctx{i}", "context": {"cluster": f"c{i}", "user": "u"}})
    if current is not None:
        doc["current-context"] = current
    p = tmp / name
    p.write_text(yaml.safe_dump(doc))
    return p


def official(path: Path | None, context: str | None = None) -> Any:
    from kubernetes import config as kconfig
    from kubernetes.client import Configuration

    cfg = Configuration()
    kconfig.load_kube_config(config_file=str(path) if path is not None else None, context=context,
                             client_configuration=cfg)
    return cfg


def _content(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def same(ours: Any, theirs: Any) -> None:
    assert ours.host == theirs.host
    assert ours.auth_settings() == theirs.auth_settings()
    assert (ours.verify_ssl, ours.tls_server_name, ours.proxy) == \
        (theirs.verify_ssl, theirs.tls_server_name, theirs.proxy)
    for attr in ("ssl_ca_cert", "cert_file", "key_file"):
        assert _content(getattr(ours, attr)) == _content(getattr(theirs, attr)), attr
    ours.connection_pool_maxsize = theirs.connection_pool_maxsize = 64
    kw = [dict(pool_manager(c).connection_pool_kw) for c in (ours, theirs)]
    for d in kw:
        for k in ("ca_certs", "cert_file", "key_file"):
            d[k] = _content(d.get(k))
    assert kw[0] == kw[1]


CASES = {
    "http-token": ({"server": "http://127.0.0.1:8080/"}, {"token": "abc"}),
    "https-data": ({"server": "https://10.0.0.1:6443", "certificate-authority-data": b64(CA)},
                   {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}),
    "https-data-and-token": ({"server": "https://k8s.example:443", "certificate-authority-data": b64(CA)},
                             {"token": "t0k", "client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}),
    "https-files": ({"server": "https://k8s:6443", "certificate-authority": "pki/ca.crt"},
                    {"client-certificate": "pki/c.crt", "client-key": "pki/c.key", "tokenFile": "tok"}),
    "insecure-sni": ({"server": "https://1.2.3.4:6443", "insecure-skip-tls-verify": True,
                      "tls-server-name": "kubernetes.default"}, {"token": "x"}),
    "token-beats-token-file": ({"server": "http://h:1"}, {"token": "inline", "tokenFile": "tok"}),
    "empty-token-beats-token-file": ({"server": "http://h:1"}, {"token": "", "tokenFile": "tok"}),
    "no-user-entry": ({"server": "https://h:6443", "certificate-authority-data": b64(CA)}, None),
    "empty-user": ({"server": "https://h:6443", "certificate-authority-data": b64(CA)}, {}),
    "http-ignores-certs": ({"server": "http://h:80", "certificate-authority": "missing.crt"},
                           {"client-certificate": "missing.crt"}),
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(CA)
    (tmp_path / "pki" / "c.crt").write_bytes(CERT)
    (tmp_path / "pki" / "c.key").write_bytes(KEY)
    (tmp_path / "tok").write_text("from-file")
    return tmp_path


@pytest.mark.parametrize("case", sorted(CASES))
def test_agrees_with_the_official_loader(case: str, files: Path) -> None:
    cluster, user = CASES[case]
    p = kubeconfig(files, cluster, user)
    ours = lean.load(str(p))
    assert ours is not None, "the lean reader declined"
    same(ours, official(p))
    cfg = load_client_configuration(str(p))
    assert type(cfg) is lean.ClientConfig


def test_contexts_environment_and_relative_paths(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = kubeconfig(files, {"server": "https://k8s:6443", "certificate-authority": "pki/ca.crt"}, {"token": "t"},
                   extra_contexts=2)
    for ctx in (None, "ctx0", "ctx1"):
        ours = lean.load(str(p), ctx)
        assert ours is not None
        same(ours, official(p, ctx))
    assert lean.load(str(p), "ctx1").host == "http://other-1:8080"  # type: ignore[union-attr]
    # $KUBECONFIG, relative to another directory than the working one.
    monkeypatch.chdir("/")
    monkeypatch.setenv("KUBECONFIG", str(p))
    ours = lean.load(None)
    assert ours is not None and _content(ours.ssl_ca_cert) == CA
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(files))
    (files / ".kube").mkdir()
    (files / ".kube" / "config").write_text(p.read_text())
    with pytest.raises(AssertionError):  # ~/.kube/config's CA path is relative to ~/.kube
        assert lean.load(None) is not None
    (files / ".kube" / "pki").symlink_to(files / "pki")
    assert _content(lean.load(None).ssl_ca_cert) == CA  # type: ignore[union-attr]


@pytest.mark.parametrize("cluster, user", [
    ({"server": "https://h:6443", "proxy-url": "http://proxy:3128"}, {"token": "t"}),
    ({"server": "https://h:6443"}, {"username": "admin", "password": "secret"}),
    ({"server": "https://h:6443"}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}),
    ({"server": "https://h:6443"}, {"auth-provider": {"name": "oidc", "config": {}}}),
    ({"server": "https://h:6443"}, {"token": "t", "as": "someone-else"}),
    ({"server": "https://h:6443", "certificate-authority": "nowhere.crt"}, {"token": "t"}),
    ({"server": "https://h:6443", "extensions": []}, {"token": "t"}),
])
def test_declines_what_it_does_not_read(cluster: dict[str, Any], user: dict[str, Any], files: Path) -> None:
    p = kubeconfig(files, cluster, user)
    assert lean.load(str(p)) is None


def test_declines_several_files_missing_contexts_and_malformed_documents(files: Path) -> None:
    a = kubeconfig(files, {"server": "http://a:1"}, {"token": "t"}, name="a")
    b = kubeconfig(files, {"server": "http://b:1"}, {"token": "t"}, name="b")
    assert lean.load(f"{a}{os.pathsep}{b}") is None
    # The official loader merges them (the first file's context wins).
    cfg = load_client_configuration(f"{a}{os.pathsep}{b}")
    assert type(cfg) is not lean.ClientConfig and cfg.host == "http://a:1"
    assert lean.load(str(kubeconfig(files, {"server": "http://a:1"}, None, current=None, name="c"))) is None
    assert lean.load(str(a), "no-such-context") is None
    bad = files / "bad"
    bad.write_text("- just\n- a list\n")
    assert lean.load(str(bad)) is None
    nameless = files / "nameless"
    nameless.write_text(yaml.safe_dump({"current-context": "x", "contexts": [{"context": {"cluster": "c"}}]}))
    assert lean.load(str(nameless)) is None
    assert lean.load(str(files / "does-not-exist")) is None
    # The official loader raises its own errors for these.
    from kubernetes.config.config_exception import ConfigException

    with pytest.raises(ConfigException):
        load_client_configuration(str(nameless))


def test_a_data_field_is_one_temporary_file_per_content(files: Path) -> None:
    p = kubeconfig(files, *CASES["https-data"])
    first, second = lean.load(str(p)), lean.load(str(p))
    assert first is not None and second is not None
    assert first.ssl_ca_cert == second.ssl_ca_cert and first.ssl_ca_cert != first.cert_file
    assert (Path(first.cert_file).read_bytes(), Path(first.key_file).read_bytes()) == (CERT, KEY)  # type: ignore[arg-type]
