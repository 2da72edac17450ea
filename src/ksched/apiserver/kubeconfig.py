"""Writing a kubeconfig for the embedded API server."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

__all__ = ["write_kubeconfig"]


def write_kubeconfig(path: str | Path, server: str, *, token: str | None = None, ca_file: str | Path | None = None,
                     name: str = "ksched") -> Path:
    cluster: dict[str, object] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority-data"] = base64.b64encode(Path(ca_file).read_bytes()).decode()
    user: dict[str, object] = {}
    if token:
        user["token"] = token
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    p.chmod(0o600)
    return p
