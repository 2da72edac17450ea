"""Loading manifests: multi-document YAML, JSON, kind: List, directories, kubectl dumps, and
errors that say where they are -- never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ksched.api.loader import iter_manifest_files, load_manifests, parse_documents
from ksched.api.node import Node
from ksched.api.pod import Pod

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: prod
spec:
  containers:
  - name: c
    image: nginx
    resources:
      requests: {cpu: 500m, memory: 1Gi}
"""
NODE_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
"""

# What `kubectl get pods,nodes -o yaml` prints: a List whose items carry server-set fields.
KUBECTL_DUMP = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2024-05-01T10:00:00Z"
    generateName: web-7d4b9c-
    labels: {app: web, pod-template-hash: 7d4b9c}
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      manager: kube-controller-manager
      operation: Update
    name: web-7d4b9c-abcde
    namespace: default
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: web-7d4b9c
      uid: 3f1c2a9e-0000-4000-8000-000000000001
    resourceVersion: "123456"
    uid: 3f1c2a9e-0000-4000-8000-000000000002
  spec:
    containers:
    - image: nginx:1.25
      imagePullPolicy: IfNotPresent
      name: nginx
      resources:
        limits: {cpu: "1", memory: 512Mi}
        requests: {cpu: 250m, memory: 256Mi}
      terminationMessagePath: /dev/termination-log
    dnsPolicy: ClusterFirst
    nodeName: n1
    priority: 0
    restartPolicy: Always
    schedulerName: default-scheduler
    terminationGracePeriodSeconds: 30
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    conditions:
    - {lastProbeTime: null, lastTransitionTime: "2024-05-01T10:00:01Z", status: "True", type: PodScheduled}
    - {lastProbeTime: null, lastTransitionTime: "2024-05-01T10:00:05Z", status: "True", type: Ready}
    phase: Running
    qosClass: Burstable
    startTime: "2024-05-01T10:00:01Z"
- apiVersion: v1
  kind: Node
  metadata:
    labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/zone: a}
    name: n1
    resourceVersion: "123000"
    uid: 3f1c2a9e-0000-4000-8000-000000000003
  spec:
    podCIDR: 10.244.0.0/24
    taints:
    - {effect: NoSchedule, key: dedicated, value: gpu}
  status:
    allocatable: {cpu: 3920m, ephemeral-storage: "95491165742", hugepages-2Mi: "0", memory: 15Gi, pods: "110"}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    conditions:
    - {type: Ready, status: "True", reason: KubeletReady}
kind: List
metadata:
  resourceVersion: ""
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def test_multi_document_yaml(tmp_path: Path) -> None:
    f = write(tmp_path, "all.yaml", POD_YAML + "---\n---\n" + NODE_YAML + "...\n")
    res = load_manifests([f])
    assert res.errors == []
    assert [type(o) for o in res.objects] == [Pod, Node]
    assert [m.index for m in res.manifests] == [0, 2]  # the empty document is skipped but counted
    pod = res.objects[0]
    assert isinstance(pod, Pod) and pod.key == "prod/web"
    assert res.manifests[0].where == f"{f}[0]"


def test_json_object_array_and_list(tmp_path: Path) -> None:
    import yaml
    pod = yaml.safe_load(POD_YAML)
    node = yaml.safe_load(NODE_YAML)
    f1 = write(tmp_path, "pod.json", json.dumps(pod))
    f2 = write(tmp_path, "array.json", json.dumps([pod, node]))
    f3 = write(tmp_path, "list.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod, node]}))
    for f, n in [(f1, 1), (f2, 2), (f3, 2)]:
        res = load_manifests([f])
        assert res.errors == [], f
        assert len(res.objects) == n
    res = load_manifests([f3])
    assert [m.item for m in res.manifests] == [0, 1]
    assert res.manifests[1].where == f"{f3}[0].items[1]"


def test_json_content_in_a_yaml_file(tmp_path: Path) -> None:
    import yaml
    f = write(tmp_path, "pod.yaml", json.dumps(yaml.safe_load(POD_YAML), indent=2))
    res = load_manifests([f])
    assert res.errors == [] and len(res.objects) == 1


def test_kubectl_dump(tmp_path: Path) -> None:
    f = write(tmp_path, "dump.yaml", KUBECTL_DUMP)
    res = load_manifests([f])
    assert res.errors == []
    pod, node = res.objects
    assert isinstance(pod, Pod) and isinstance(node, Node)
    assert pod.node_name == "n1" and pod.phase == "Running" and pod.resource_version == "123456"
    assert pod.controller_ref() is not None and pod.controller_ref().kind == "ReplicaSet"  # type: ignore[union-attr]
    assert node.allocatable["cpu"] == 3920 and node.allocatable["memory"] == 15 * 1024**3
    assert [str(t) for t in node.taints] == ["dedicated=gpu:NoSchedule"]


def test_typed_lists(tmp_path: Path) -> None:
    f = write(tmp_path, "pods.yaml", "apiVersion: v1\nkind: PodList\nitems:\n" +
              "".join("- " + POD_YAML.replace("\n", "\n  ").replace("name: web", f"name: web{i}").rstrip() + "\n"
                      for i in range(3)))
    res = load_manifests([f])
    assert res.errors == []
    assert sorted(o.name for o in res.objects) == ["web0", "web1", "web2"]


def test_directories_recursive_sorted_and_filtered(tmp_path: Path) -> None:
    write(tmp_path, "b/node.yml", NODE_YAML)
    write(tmp_path, "a/pod.yaml", POD_YAML)
    write(tmp_path, "a/.hidden.yaml", "this: is not loaded")
    write(tmp_path, "a/README.md", "not a manifest")
    write(tmp_path, "c.json", json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}))
    files = [p.relative_to(tmp_path).as_posix() for p in iter_manifest_files([tmp_path])]
    assert files == ["c.json", "a/pod.yaml", "b/node.yml"]
    res = load_manifests([tmp_path])
    assert res.errors == []
    assert [o.KIND for o in res.objects] == ["Namespace", "Pod", "Node"]


def test_broken_yaml_is_reported_with_file_and_document_index(tmp_path: Path) -> None:
    f = write(tmp_path, "bad.yaml", POD_YAML + "---\n" + NODE_YAML + "---\nkind: Pod\nmetadata: {name: [unclosed\n")
    res = load_manifests([f])
    assert len(res.errors) == 1
    err = res.errors[0]
    assert err.source == str(f) and err.index == 2
    assert str(err).startswith(f"{f}[2]: invalid YAML: line ")
    # The documents before the broken one still load.
    assert [o.KIND for o in res.objects] == ["Pod", "Node"]


def test_invalid_object_error_says_where(tmp_path: Path) -> None:
    f = write(tmp_path, "p.yaml", NODE_YAML + "---\n" + POD_YAML.replace("500m", "1.2.3"))
    res = load_manifests([f])
    assert [o.KIND for o in res.objects] == ["Node"]
    assert [str(e) for e in res.errors] == [
        f'{f}[1]: Pod prod/web: spec.containers[0].resources.requests.cpu: invalid quantity "1.2.3"']


def test_list_item_errors_carry_the_item_index(tmp_path: Path) -> None:
    dump = KUBECTL_DUMP.replace("cpu: 250m", "cpu: lots")
    f = write(tmp_path, "dump.yaml", dump)
    res = load_manifests([f])
    assert [o.KIND for o in res.objects] == ["Node"]
    (err,) = res.errors
    assert err.index == 0 and err.path == "items[0].spec.containers[0].resources.requests.cpu"
    assert "web-7d4b9c-abcde" in str(err)


def test_unknown_kinds_and_non_objects(tmp_path: Path) -> None:
    f = write(tmp_path, "x.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: d}\n---\n- 1\n- 2\n"
                                  "---\n42\n---\nkind: List\nitems: 3\n---\nkind: List\nitems: [1]\n---\n"
                                  "metadata: {name: nokind}\n")
    res = load_manifests([f])
    assert res.objects == []
    msgs = [str(e) for e in res.errors]
    assert len(msgs) == 6
    assert f'{f}[0]: Widget d: kind: no kind "Widget" is registered for version "example.com/v1"' in msgs
    assert f"{f}[1]: expected an object, got list" in msgs
    assert f"{f}[2]: expected an object, got int" in msgs
    assert f"{f}[3]: List: items: items must be a list" in msgs
    assert f"{f}[4]: items[0]: expected an object" in msgs
    assert f"{f}[5]: <no kind> nokind: kind: Object 'Kind' is missing" in msgs


def test_validation_can_be_skipped(tmp_path: Path) -> None:
    f = write(tmp_path, "p.yaml", POD_YAML.replace("name: c\n", "name: Bad_Name\n"))
    assert len(load_manifests([f]).errors) == 1
    res = load_manifests([f], validate_objects=False)
    assert res.errors == [] and len(res.objects) == 1


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage\x80")
    res = load_manifests([missing, binary])
    assert res.objects == []
    assert len(res.errors) == 2
    assert all("cannot read" in str(e) for e in res.errors)


def test_broken_json(tmp_path: Path) -> None:
    f = write(tmp_path, "bad.json", '{"kind": "Pod", "metadata": {')
    res = load_manifests([f])
    assert res.objects == [] and len(res.errors) == 1
    assert str(res.errors[0]).startswith(f"{f}: invalid JSON/YAML")


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(
    st.text(max_size=200),
    st.text(alphabet="{}[]:,-\n #'\"!&*|>?%@`abc01.", max_size=120),
    st.lists(st.sampled_from([POD_YAML, NODE_YAML, "---\n", "kind: List\n", "items:\n", "- ", "  x: [\n",
                              "{", "}", "\t", "key: &a 1\nother: *a\n", "!!python/object:os.system x\n"]),
             max_size=8).map("".join),
))
def test_junk_never_crashes(text: str) -> None:
    for source in ("junk.yaml", "junk.json"):
        manifests, errors = parse_documents(text, source)
        for m in manifests:
            assert isinstance(m.raw, dict)
            m.ref  # noqa: B018 - must not raise
            m.where  # noqa: B018
        for e in errors:
            assert str(e).startswith(source)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=200))
def test_junk_files_never_crash(tmp_path_factory: object, data: bytes) -> None:
    d = tmp_path_factory.mktemp("junk")  # type: ignore[attr-defined]
    (d / "x.yaml").write_bytes(data)
    res = load_manifests([d])
    assert len(res.objects) + len(res.errors) >= 0
