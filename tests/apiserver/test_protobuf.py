"""Protobuf request bodies (ksched.apiserver.protobuf): the runtime.Unknown envelope, nested
messages, repeated fields and maps, the well-known types (Time, Quantity, IntOrString,
RawExtension), the zero values of non-pointer fields dropped and those of pointer fields kept,
and refusals (415) naming what could not be read. Bodies are encoded here with a minimal encoder
of the wire format; test_kubectl_batch.py has kubectl's own."""

from __future__ import annotations

import pytest

from ksched.api.errors import BadRequest, UnsupportedMediaType
from ksched.apiserver.protobuf import decode_object


def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f(num: int, value: bytes | str | int | bool) -> bytes:
    """One field: varint for ints and bools, length-delimited for bytes and strings."""
    if isinstance(value, bool | int):
        return varint(num << 3) + varint(int(value))
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, obj: bytes) -> bytes:
    return b"k8s\x00" + f(1, f(1, api_version) + f(2, kind)) + f(2, obj) + f(3, "") + f(4, "")


def entry(k: str, v: bytes | str) -> bytes:
    return f(1, k) + f(2, v)


def test_a_namespace_as_kubectl_create_namespace_sends_it() -> None:
    # Non-pointer fields come even when empty (name, generateName, ...): dropped as JSON omits them.
    md = f(1, "team-a") + f(2, "") + f(3, "") + f(4, "") + f(5, "") + f(6, "") + f(7, 0) + f(8, b"")
    body = envelope("v1", "Namespace", f(1, md) + f(2, b"") + f(3, f(1, "")))
    assert decode_object(body) == {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": "team-a", "creationTimestamp": "1970-01-01T00:00:00Z"},
                                   "spec": {}, "status": {}}


def test_a_job_with_maps_quantities_repeated_fields_and_pointer_zeros() -> None:
    container = (f(1, "c") + f(2, "busybox") + f(3, "sh") + f(3, "-c") + f(3, "echo hi")
                 + f(8, f(2, entry("cpu", f(1, "100m"))) + f(1, entry("memory", f(1, "64Mi"))))
                 + f(7, f(1, "A") + f(2, "b")) + f(6, f(3, 80) + f(4, "TCP")))
    pod_spec = f(2, container) + f(3, "Never") + f(4, 0) + f(7, entry("disk", "ssd")) + f(21, False)
    template = f(1, f(12, entry("ksched.io/run-seconds", "5"))) + f(2, pod_spec)
    spec = f(1, 0) + f(2, 3) + f(6, template) + f(10, False)
    md = f(1, "pi") + f(3, "default") + f(11, entry("app", "pi")) + f(14, "example.com/x") + \
        f(8, f(1, 1_735_689_600) + f(2, 0))
    obj = decode_object(envelope("batch/v1", "Job", f(1, md) + f(2, spec)))
    assert obj["metadata"] == {"name": "pi", "namespace": "default", "labels": {"app": "pi"},
                               "finalizers": ["example.com/x"], "creationTimestamp": "2025-01-01T00:00:00Z"}
    assert obj["spec"]["parallelism"] == 0 and obj["spec"]["completions"] == 3  # a pointer: 0 is kept
    assert obj["spec"]["suspend"] is False
    tspec = obj["spec"]["template"]["spec"]
    assert tspec["terminationGracePeriodSeconds"] == 0 and tspec["automountServiceAccountToken"] is False
    assert tspec["nodeSelector"] == {"disk": "ssd"} and tspec["restartPolicy"] == "Never"
    assert tspec["containers"] == [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo hi"],
                                    "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}},
                                    "env": [{"name": "A", "value": "b"}],
                                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}]
    assert obj["spec"]["template"]["metadata"] == {"annotations": {"ksched.io/run-seconds": "5"}}


def test_int_or_string_and_negative_numbers() -> None:
    # A probe's port as a name (IntOrString type 1) and as a number; a negative int64.
    probe_named = f(1, f(2, f(2, f(1, 1) + f(3, "http"))))  # handler.httpGet.port
    probe_number = f(1, f(2, f(2, f(1, 0) + f(2, 8080))))
    container = f(1, "c") + f(2, "img") + f(10, probe_named) + f(11, probe_number)
    pod = f(1, f(1, "p")) + f(2, f(2, container) + f(25, -5))
    obj = decode_object(envelope("v1", "Pod", pod))
    c = obj["spec"]["containers"][0]
    assert c["livenessProbe"]["httpGet"]["port"] == "http"
    assert c["readinessProbe"]["httpGet"]["port"] == 8080
    assert obj["spec"]["priority"] == -5


def test_a_kind_ksched_does_not_read_is_refused() -> None:
    with pytest.raises(UnsupportedMediaType) as ei:
        decode_object(envelope("v1", "ReplicationController", f(1, f(1, "d"))))
    assert 'not "v1, Kind=ReplicationController"; send the object as JSON' in ei.value.message


def test_an_unknown_field_is_refused_not_dropped() -> None:
    with pytest.raises(UnsupportedMediaType) as ei:
        decode_object(envelope("v1", "Namespace", f(1, f(1, "x") + f(99, "?"))))
    assert ei.value.message == ("the protobuf body has field 99 of ObjectMeta at metadata, which ksched cannot "
                                "read; send the object as JSON")


@pytest.mark.parametrize("body", [b"nope", b"k8s\x00\x0a\x05ab", b"k8s\x00\x0a"])
def test_malformed_bodies(body: bytes) -> None:
    with pytest.raises((BadRequest, UnsupportedMediaType)):
        decode_object(body)


def test_an_eviction_keeps_a_zero_grace_period() -> None:
    """kubectl drain's evictions: gracePeriodSeconds and orphanDependents are pointers."""
    body = envelope("policy/v1", "Eviction", f(1, f(1, "web-0") + f(3, "default"))
                    + f(2, f(1, 0) + f(3, False) + f(4, "")))
    assert decode_object(body) == {"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": "web-0", "namespace": "default"},
                                   "deleteOptions": {"gracePeriodSeconds": 0, "orphanDependents": False}}


def test_a_deployment_as_kubectl_create_deployment_sends_it() -> None:
    """Go writes every non-pointer field (empty strings, zeros, the status): left out as JSON
    omits them; replicas is a pointer, so an explicit 0 stays; maxUnavailable/maxSurge are
    IntOrStrings as a percentage and a number."""
    def deployment(replicas: int) -> bytes:
        md = f(1, "web") + f(2, "") + f(3, "") + f(7, 0) + f(11, entry("app", "web"))
        container = f(1, "nginx") + f(2, "nginx:1.27") + f(5, "") + f(6, f(3, 80) + f(4, "")) + \
            f(8, f(2, entry("cpu", f(1, "100m"))))
        template = f(1, f(1, "") + f(11, entry("app", "web"))) + f(2, f(2, container) + f(3, "") + f(11, 0))
        strategy = f(1, "RollingUpdate") + f(2, f(1, f(1, 1) + f(3, "30%")) + f(2, f(1, 0) + f(2, 2)))
        spec = f(1, replicas) + f(2, f(1, entry("app", "web"))) + f(3, template) + f(4, strategy) + f(5, 0) + f(7, False)
        status = f(1, 0) + f(2, 0) + f(3, 0) + f(4, 0) + f(5, 0) + f(7, 0)
        return envelope("apps/v1", "Deployment", f(1, md) + f(2, spec) + f(3, status))

    obj = decode_object(deployment(3))
    assert obj["metadata"] == {"name": "web", "labels": {"app": "web"}}
    assert obj["spec"] == {
        "replicas": 3, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
            "name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
            "resources": {"requests": {"cpu": "100m"}}}]}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "30%", "maxSurge": 2}}}
    assert decode_object(deployment(0))["spec"]["replicas"] == 0
