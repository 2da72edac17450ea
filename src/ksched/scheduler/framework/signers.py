"""Pod signature fragments: the signer names plugins key their fragments with, and the signers
several plugins share (upstream's ``k8s.io/kube-scheduler/framework/signers.go``, 1.36).

A fragment's value is any hashable Python value (upstream: any JSON-marshallable value, the
signature being the JSON of the merged map). Signers here return canonical values: two pods
whose values are equal ask the same question of every node, whatever the order of their
tolerations, terms, ports or volumes.

Divergences (each makes ksched's fragment capture everything the plugin's Filter and Score read
of the pod, which upstream's does not quite, so equal signatures always mean equal answers):

* ``host_ports_signer`` keys each port by (host IP, protocol, port) from the ports NodePorts
  checks (sidecar init containers and containers); upstream's signs port numbers only, so pods
  differing only in protocol or host IP share a signature there.
* ``node_affinity_signer`` tells an absent required node affinity from one with no terms (which
  matches no node); upstream's signs both as an empty list.
* ``tolerations_signer`` sorts tolerations on every field; upstream's sorts on key and value.
* The volume plugins refuse pods with PersistentVolumeClaim-backed volumes (claims and generic
  ephemeral volumes, :func:`has_claim_volumes`): their verdicts read PVs, PVCs, StorageClasses
  and CSINodes, and the previous pod's own Reserve changes those; upstream signs the volume
  sources and reuses the results regardless.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from ksched.api.pod import Pod

__all__ = [
    "CLAIMS_NOT_SIGNABLE",
    "FEATURES_SIGNER_NAME",
    "HOST_PORTS_SIGNER_NAME",
    "IMAGE_NAMES_SIGNER_NAME",
    "LABELS_SIGNER_NAME",
    "NODE_AFFINITY_SIGNER_NAME",
    "NODE_NAME_SIGNER_NAME",
    "NODE_SELECTOR_SIGNER_NAME",
    "RESOURCES_SIGNER_NAME",
    "SCHEDULER_NAME_SIGNER_NAME",
    "TOLERATIONS_SIGNER_NAME",
    "VOLUMES_SIGNER_NAME",
    "has_claim_volumes",
    "host_ports_signer",
    "labels_signer",
    "node_affinity_signer",
    "node_selector_signer",
    "tolerations_signer",
    "volumes_signer",
]

# Upstream's signer names (the keys of the signature map).
IMAGE_NAMES_SIGNER_NAME = "v1.Pod.Spec.CanonicalImageNames()"
LABELS_SIGNER_NAME = "v1.Pod.Labels"
NODE_NAME_SIGNER_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY_SIGNER_NAME = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR_SIGNER_NAME = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS_SIGNER_NAME = "v1.Pod.Spec.HostPorts()"
RESOURCES_SIGNER_NAME = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME_SIGNER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS_SIGNER_NAME = "v1.Pod.Spec.Tolerations"
VOLUMES_SIGNER_NAME = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES_SIGNER_NAME = "v1.Pod.Spec.RequiredFeatures()"

CLAIMS_NOT_SIGNABLE = "pods with PersistentVolumeClaims are not signable"


def _memo(pod: Pod, key: str, fn: Any) -> Any:
    c = pod.cached()
    v = c.get(key)
    if v is None:
        v = c[key] = fn(pod)
    return v


def host_ports_signer(pod: Pod) -> Hashable:
    """The (host IP, protocol, host port) of every port with a hostPort, sorted."""
    return _memo(pod, "sign:hostports",
                 lambda p: tuple(sorted((hp.host_ip, hp.protocol, hp.host_port) for hp in p.host_ports())))


def tolerations_signer(pod: Pod) -> Hashable:
    """The pod's tolerations (key, operator, value, effect), sorted."""
    return _memo(pod, "sign:tolerations", lambda p: tuple(sorted(t.key_tuple() for t in p.tolerations)))


def _requirements(reqs: Any) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """NodeSelectorRequirementsSigner: each requirement with its values sorted, sorted."""
    return tuple(sorted((str(r.get("key") or ""), str(r.get("operator") or ""),
                         tuple(sorted(str(v) for v in r.get("values") or ())))
                        for r in reqs or ()))


def _term(t: Any) -> tuple[Any, Any]:
    """NodeSelectorTermSigner: (matchExpressions, matchFields), each canonical."""
    t = t or {}
    return (_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))


def _node_affinity(pod: Pod) -> Hashable:
    aff = ((pod.raw.get("spec") or {}).get("affinity") or {}).get("nodeAffinity")
    if not aff:
        return None
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None if req is None else tuple(sorted(_term(t) for t in (req.get("nodeSelectorTerms") or ())))
    preferred = tuple(sorted((int(p.get("weight") or 0), _term(p.get("preference")))
                             for p in aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()))
    return (required, preferred)


def node_affinity_signer(pod: Pod) -> Hashable:
    """The pod's node affinity: required terms (None when absent) and preferred (weight, term)
    pairs, each term's requirements and values sorted, the terms sorted (they are ORed, and
    preferred weights add up, so order never matters)."""
    c = pod.cached()
    if "sign:nodeaffinity" not in c:
        c["sign:nodeaffinity"] = _node_affinity(pod)
    return c["sign:nodeaffinity"]  # type: ignore[no-any-return]


def node_selector_signer(pod: Pod) -> Hashable:
    """The pod's nodeSelector, as sorted (key, value) pairs."""
    return _memo(pod, "sign:nodeselector", lambda p: tuple(sorted(p.node_selector.items())))


def labels_signer(pod: Pod) -> Hashable:
    """The pod's labels, as sorted (key, value) pairs."""
    return _memo(pod, "sign:labels", lambda p: tuple(sorted(p.labels.items())))


def _volumes(pod: Pod) -> tuple[str, ...]:
    out = []
    for v in pod.volumes:
        src = {k: val for k, val in v.raw.items() if k != "name"}
        if src.get("configMap") is not None or src.get("secret") is not None:
            continue
        out.append(json.dumps(src, sort_keys=True, separators=(",", ":"), default=str))
    return tuple(sorted(out))


def volumes_signer(pod: Pod) -> Hashable:
    """The pod's volume sources (without the volume names), sorted; ConfigMap and Secret
    volumes are left out: they never affect scheduling and are specific to each pod."""
    if not pod.volumes:
        return ()
    return _memo(pod, "sign:volumes", _volumes)


def has_claim_volumes(pod: Pod) -> bool:
    """Whether a volume of the pod is backed by a PersistentVolumeClaim (its own or a generic
    ephemeral volume's)."""
    if not pod.volumes:
        return False
    c = pod.cached()
    v = c.get("sign:claims")
    if v is None:
        v = c["sign:claims"] = any(vol.claim_name or vol.ephemeral for vol in pod.volumes)
    return v  # type: ignore[no-any-return]
