"""The per-store kind registry (ksched.api.scheme) and CustomResourceDefinitions
(ksched.api.apiextensions): resolution by store key, by apiVersion and kind, by REST path;
custom kinds from CRDs, their served versions and schemas; name conflicts; CRD validation with
upstream's messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ksched.api.apiextensions import CustomObject, CustomResourceDefinition, crd_status, validate_crd
from ksched.api.kinds import UnknownKindError
from ksched.api.pod import Pod
from ksched.api.scheme import Scheme, resource_name
from ksched.api.service import Service


def crd(group: str = "example.com", kind: str = "Widget", plural: str = "widgets", scope: str = "Namespaced",
        versions: list[dict[str, Any]] | None = None, **names: Any) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer"}}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural, **names},
                     "versions": versions or [{"name": "v1", "served": True, "storage": True, "schema": schema}]}}


def established(raw: dict[str, Any]) -> CustomResourceDefinition:
    raw = copy.deepcopy(raw)
    raw["status"] = crd_status(raw)
    return CustomResourceDefinition.from_dict(raw)


def test_builtin_kinds_resolve_by_name_manifest_and_path() -> None:
    s = Scheme()
    assert s.resolve("Pod") is Pod and s.resolve("Service") is Service
    assert s.kind_class("v1", "Pod") is Pod and s.kind_class("", "Service") is Service
    assert s.resource("", "v1", "services") is Service
    assert s.resource("apps", "v1", "services") is None
    assert resource_name(Service) == "services" and Service.KIND_KEY == "Service"
    with pytest.raises(UnknownKindError, match=r'no kind "Widget" is registered for version "example\.com/v1"'):
        s.kind_class("example.com/v1", "Widget")


def test_custom_kinds_come_from_crds_and_stay_in_their_scheme() -> None:
    s = Scheme()
    other = Scheme()
    cls = s.add_crd(established(crd(versions=[
        {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
         "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v1alpha1", "served": False, "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}},
    ], shortNames=["wd"], categories=["all"])))
    assert issubclass(cls, CustomObject)
    assert (cls.KIND, cls.KIND_KEY, cls.API_VERSION, cls.PLURAL, cls.NAMESPACED) == (
        "Widget", "widgets.example.com", "example.com/v1", "widgets", True)
    assert cls.STATUS_SUBRESOURCE and cls.SHORT_NAMES == ("wd",) and cls.CATEGORIES == ("all",)
    assert s.resolve("widgets.example.com") is cls and s.resolve("Widget") is cls
    assert s.kind_class("example.com/v1beta1", "Widget") is cls
    with pytest.raises(UnknownKindError):
        s.kind_class("example.com/v1alpha1", "Widget")  # not served
    assert s.resource("example.com", "v1beta1", "widgets") is cls
    assert s.versions(cls) == ("v1", "v1beta1")
    assert s.group_versions()[("example.com", "v1beta1")] == [cls]
    # Another store's scheme knows nothing of it.
    assert other.resolve("Widget") is None and other.resource("example.com", "v1", "widgets") is None
    assert s.copy().resolve("Widget") is cls
    assert s.remove_crd("widgets.example.com") is cls and s.resolve("Widget") is None


def test_a_kind_name_used_by_two_groups_resolves_by_key_only() -> None:
    s = Scheme()
    a = s.add_crd(established(crd(group="a.example.com")))
    b = s.add_crd(established(crd(group="b.example.com")))
    assert s.resolve("Widget") is None
    assert s.resolve("widgets.a.example.com") is a and s.resolve("widgets.b.example.com") is b
    assert s.kind_class("b.example.com/v1", "Widget") is b
    # A custom Service of another group never hides the core one.
    svc = s.add_crd(established(crd(group="serving.knative.dev", kind="Service", plural="services")))
    assert s.resolve("Service") is Service and s.kind_class("serving.knative.dev/v1", "Service") is svc


@pytest.mark.parametrize(("mutate", "conflict"), [
    (lambda c: None, None),
    (lambda c: c["spec"]["names"].update(plural="gadgets"), ("KindConflict", '"Widget" is already in use')),
    (lambda c: c["spec"]["names"].update(kind="Gadget", plural="gadgets", shortNames=["wd"]),
     ("Conflict", '"wd" is already in use')),
    (lambda c: c["spec"]["names"].update(kind="Gadget", plural="gadgets", listKind="WidgetList"),
     ("ListKindConflict", '"WidgetList" is already in use')),
])
def test_names_conflict_within_a_group(mutate: Any, conflict: tuple[str, str] | None) -> None:
    s = Scheme()
    s.add_crd(established(crd(shortNames=["wd"])))
    other = crd(shortNames=["x"])
    mutate(other)
    other["metadata"]["name"] = f"{other['spec']['names']['plural']}.example.com"
    if other["metadata"]["name"] == "widgets.example.com":
        other["metadata"]["name"] = "widgets.example.com"  # the same CRD again: no conflict with itself
    assert s.names_conflict(CustomResourceDefinition.from_dict(other)) == conflict


def test_builtin_resources_of_a_group_cannot_be_redefined() -> None:
    c = crd(group="node.k8s.io", kind="RuntimeClass", plural="runtimeclasses")
    assert Scheme().names_conflict(CustomResourceDefinition.from_dict(c)) == (
        "Conflict", '"runtimeclasses" is already in use')


def test_crd_status_as_the_naming_and_establishing_controllers_set_it() -> None:
    st = crd_status(crd())
    assert st["acceptedNames"] == {"kind": "Widget", "plural": "widgets", "singular": "widget",
                                   "listKind": "WidgetList"}
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == [
        ("NamesAccepted", "True", "NoConflicts"), ("Established", "True", "InitialNamesAccepted")]
    assert st["storedVersions"] == ["v1"]
    bad = crd_status(crd(), ("KindConflict", '"Widget" is already in use'))
    assert [(c["type"], c["status"]) for c in bad["conditions"]] == [("NamesAccepted", "False"),
                                                                      ("Established", "False")]


_V = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}


@pytest.mark.parametrize(("mutate", "want"), [
    (lambda c: None, []),
    (lambda c: c["spec"].update(group="example"), [
        'spec.group: Invalid value: "example": should be a domain with at least one dot',
        'metadata.name: Invalid value: "widgets.example.com": must be spec.names.plural+"."+spec.group']),
    (lambda c: c["metadata"].update(name="widget.example.com"),
     ['metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group']),
    (lambda c: c["spec"].update(scope="Global"), ['spec.scope: Unsupported value: "Global": supported values: '
                                                  '"Cluster", "Namespaced"']),
    (lambda c: c["spec"]["names"].pop("kind"), ["spec.names.kind: Required value"]),
    (lambda c: c["spec"]["names"].update(listKind="Widget"),
     ['spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same']),
    (lambda c: c["spec"].update(versions=[{**_V, "storage": False}]),
     ["spec.versions: Invalid value: [v1]: must have exactly one version marked as storage version"]),
    (lambda c: c["spec"].update(versions=[_V, {**_V}]),
     ['spec.versions[1].name: Duplicate value: "v1"',
      "spec.versions: Invalid value: [v1, v1]: must have exactly one version marked as storage version"]),
    (lambda c: c["spec"].update(versions=[{"name": "v1", "served": True, "storage": True}]),
     ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]),
    (lambda c: c["spec"].update(versions=[{**_V, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"description": "?"}}}}}]),
     ["spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for "
      "specified object fields"]),
    (lambda c: (c["spec"].update(group="snapshot.storage.k8s.io"),
                c["metadata"].update(name="widgets.snapshot.storage.k8s.io")),
     ['metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval '
      'annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111']),
])
def test_crd_validation(mutate: Any, want: list[str]) -> None:
    c = crd()
    mutate(c)
    assert [str(e) for e in validate_crd(c)] == want


def test_crd_updates_may_not_change_scope_or_drop_stored_versions() -> None:
    old = crd()
    old["status"] = crd_status(old)
    new = crd(scope="Cluster", versions=[{**_V, "name": "v2"}])
    assert [str(e) for e in validate_crd(new, old)] == [
        'spec.scope: Invalid value: "Cluster": field is immutable',
        "status.storedVersions: Invalid value: ['v1']: must have the same version v1 in spec.versions[*].name"]


def test_custom_objects_are_pruned_defaulted_and_validated_in_their_version() -> None:
    s = Scheme()
    cls = s.add_crd(established(crd(versions=[
        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}}}},
        {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}])))
    raw = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"other": 1}}
    assert s.validate(raw, cls) == [] and raw["spec"] == {"size": 1}
    raw = {"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"other": 1}}
    assert s.validate(raw) == [] and raw["spec"] == {"other": 1}
    # Stored in the storage version.
    assert raw["apiVersion"] == "example.com/v1"
    raw = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "Not_A_Name"}, "spec": {}}
    assert [e.path for e in s.validate(raw)] == ["metadata.name"]
