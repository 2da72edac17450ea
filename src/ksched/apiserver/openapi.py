"""OpenAPI documents of the served kinds: ``/openapi/v2`` (Swagger 2.0, JSON) and ``/openapi/v3``
(an index of per group-version documents), as kube-apiserver publishes them
(``staging/src/k8s.io/apiserver/pkg/server/routes/openapi.go``, ``k8s.io/kube-openapi``).

Schemas are not written by hand: they are derived from the official Python client's generated
model classes (``kubernetes.client.models``), whose ``openapi_types``/``attribute_map`` and
pydantic fields carry every property, its JSON name, type, description and whether it is
required. A served kind is mapped to its model class by name (``apps/v1`` ``Deployment`` ->
``V1Deployment``, group-prefixed names such as ``CoreV1Event`` first), so a kind registered later
gets its schema with no extra work. A kind without a model class (a custom resource) gets a
schema that accepts any field, unless its class offers ``openapi_schema()``.

Definition names follow upstream's (``io.k8s.api.core.v1.Pod``,
``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``): the package of a top-level kind comes
from its API group; a nested type takes the package named by its class prefix, a small table
for the apimachinery types, or else the package of the first API group (core first) whose
client module reaches it.

Known divergences: the v2 document is served as JSON only (kubectl 1.32 reads v3 for validation,
apply patches and explain; a protobuf-only request gets 406, as a server without the v2
protobuf encoding answers); integer formats (int32/int64) and the named string types
(``Quantity``, ``IntOrString``) are not distinguished, as the Python client does not keep them
(``IntOrString`` and free-form fields accept any value); list merge keys come from the server's
own strategic-merge-patch table (``ksched.apiserver.patch``) rather than Go struct tags."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ksched.apiserver.openapi_proto import encode_document
from ksched.apiserver.patch import patch_merge_key, patch_strategy

__all__ = [
    "ModelIndex",
    "OpenAPIDocuments",
    "SchemaSet",
    "model_index",
]

_MODEL_NAME = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:(?:alpha|beta)\d+)?)([A-Z]\w*)$")
_CLASS_SOURCE = re.compile(r"^class (\w+)\(BaseModel\):.*?^    openapi_types: ClassVar\[Dict\[str, str\]\] = (\{.*?^    \})",
                           re.S | re.M)
_API_MODULE = re.compile(r"^(\w+?)_(v\d+(?:(?:alpha|beta)\d+)?)_api$")
_MODEL_IMPORT = re.compile(r"^from kubernetes\.client\.models\.\w+ import (\w+)$", re.M)
# Package -> the client module's prefix where they differ.
_MODULE_OF_PACKAGE = {"rbac": "rbac_authorization", "flowcontrol": "flowcontrol_apiserver",
                      "apiserverinternal": "internal_apiserver"}
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")

# Types of k8s.io/apimachinery (whichever API group's client module names them).
_META_TYPES = frozenset((
    "APIGroup", "APIGroupList", "APIResource", "APIResourceList", "APIVersions", "Condition", "DeleteOptions",
    "FieldSelectorRequirement", "GroupVersionForDiscovery", "LabelSelector", "LabelSelectorRequirement", "ListMeta",
    "ManagedFieldsEntry", "ObjectMeta", "OwnerReference", "Preconditions", "ServerAddressByClientCIDR", "Status",
    "StatusCause", "StatusDetails", "WatchEvent",
))
# Types a client module names for a subresource of another group (pods/eviction, */scale).
_SUBRESOURCE_TYPES = {"Eviction": "policy", "Scale": "autoscaling"}
# Group -> the Go package's last element where it is not the group's first label.
_PACKAGE_OF_GROUP = {"": "core", "internal.apiserver.k8s.io": "apiserverinternal"}
_PACKAGE_ROOT = {
    "apiextensions": "io.k8s.apiextensions-apiserver.pkg.apis",
    "apiregistration": "io.k8s.kube-aggregator.pkg.apis",
    "meta": "io.k8s.apimachinery.pkg.apis",
}
_PRIMITIVES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytes": {"type": "string", "format": "byte"},
    "object": {},
}
_SMP = "application/strategic-merge-patch+json"
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")


def group_package(group: str) -> str:
    """The Go package element of an API group: "" -> core, apps -> apps, rbac.authorization.k8s.io -> rbac."""
    return _PACKAGE_OF_GROUP.get(group) or group.split(".")[0]


def _definition_name(package: str, version: str, kind: str) -> str:
    if package == "meta":
        return f"io.k8s.apimachinery.pkg.apis.meta.{version}.{kind}"
    return f"{_PACKAGE_ROOT.get(package, 'io.k8s.api')}.{package}.{version}.{kind}"


def _split_model_name(name: str) -> tuple[str, str, str] | None:
    """``CoreV1Event`` -> (core, v1, Event); ``V1beta1Foo`` -> ("", v1beta1, Foo)."""
    m = _MODEL_NAME.match(name)
    if m is None:
        return None
    prefix, ver, kind = m.groups()
    return (prefix or "").lower(), ver.lower(), kind


class ModelIndex:
    """The model classes of the official Python client, with the API group each belongs to.

    The graph of types (each class's ``openapi_types``) and the classes each group's client
    module names are read from the package's sources, so that naming every type does not import
    all ~850 pydantic models (over a second); a class is imported when its schema is built."""

    def __init__(self) -> None:
        import kubernetes.client.api as api_pkg
        import kubernetes.client.models as models

        self._models = models
        self.types: dict[str, dict[str, str]] = {}
        for path in sorted(Path(models.__file__).parent.glob("*.py")):
            text = path.read_text(encoding="utf-8")
            for m in _CLASS_SOURCE.finditer(text):
                self.types[m.group(1)] = ast.literal_eval(m.group(2))
        # (module prefix, version) -> model class names the group's client module uses, e.g. ("apps", "v1").
        self.module_models: dict[tuple[str, str], list[str]] = {}
        for path in sorted(Path(api_pkg.__file__).parent.glob("*_api.py")):
            m = _API_MODULE.match(path.stem)
            if m is None:
                continue
            named = {n for n in _MODEL_IMPORT.findall(path.read_text(encoding="utf-8")) if n in self.types}
            self.module_models[(m.group(1), m.group(2))] = sorted(named)
        self._packages = self._assign_packages()

    def _assign_packages(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in self.types:
            parts = _split_model_name(name)
            if parts is None:
                continue
            prefix, _, kind = parts
            if prefix:
                out[name] = prefix
            elif kind in _META_TYPES:
                out[name] = "meta"
            elif kind in _SUBRESOURCE_TYPES:
                out[name] = _SUBRESOURCE_TYPES[kind]
        # Everything else: the first group (core first) whose client module reaches the type.
        for mod in sorted(self.module_models, key=lambda k: (k[0] != "core", k)):
            package = "apiserverinternal" if mod[0] == "internal_apiserver" else mod[0].split("_")[0]
            stack = list(self.module_models[mod])
            while stack:
                n = stack.pop()
                if n in out and n not in self.module_models[mod]:
                    continue
                out.setdefault(n, package)
                stack.extend(r for r in self.references(n) if r not in out)
        return out

    def references(self, name: str) -> list[str]:
        return [e for t in self.types[name].values() if (e := _element_type(t)) in self.types]

    def model(self, name: str) -> type:
        return getattr(self._models, name)  # type: ignore[no-any-return]

    def model_for(self, group: str, version: str, kind: str) -> str | None:
        """The model class name of a kind: among the names the group's client module uses,
        ``<Prefix><Version><Kind>`` (``CoreV1Event``) or ``<Version><Kind>``; else a
        ``<Version><Kind>`` of the group's package."""
        pkg = group_package(group)
        named = self.module_models.get((_MODULE_OF_PACKAGE.get(pkg, pkg), version)) or []
        plain = None
        for n in named:
            parts = _split_model_name(n)
            if parts is not None and parts[1:] == (version, kind):
                if parts[0]:
                    return n
                plain = n
        if plain is not None:
            return plain
        n = f"{version[:1].upper()}{version[1:]}{kind}"
        return n if self._packages.get(n) == pkg else None

    def definition_name(self, name: str) -> str:
        parts = _split_model_name(name)
        assert parts is not None, name
        return _definition_name(self._packages.get(name, "core"), parts[1], parts[2])


def _element_type(t: str) -> str:
    while True:
        m = _LIST.match(t) or _DICT.match(t)
        if m is None:
            return t
        t = m.group(1)


@lru_cache(maxsize=1)
def model_index() -> ModelIndex:
    return ModelIndex()


def _description(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return doc.split("\n\nAttributes:", 1)[0].split("    Attributes:", 1)[0].strip()


class SchemaSet:
    """Schemas of the served kinds and everything they reference, keyed by definition name,
    with ``$ref`` s under ``ref_prefix`` (``#/definitions/`` for v2, ``#/components/schemas/`` for v3)."""

    def __init__(self, ref_prefix: str, index: ModelIndex | None = None) -> None:
        self.index = index or model_index()
        self.ref_prefix = ref_prefix
        self.schemas: dict[str, dict[str, Any]] = {}

    def ref(self, name: str) -> dict[str, Any]:
        return {"$ref": self.ref_prefix + name}

    def _type_schema(self, t: str) -> dict[str, Any]:
        if t in _PRIMITIVES:
            return dict(_PRIMITIVES[t])
        m = _LIST.match(t)
        if m is not None:
            return {"type": "array", "items": self._type_schema(m.group(1))}
        m = _DICT.match(t)
        if m is not None:
            return {"type": "object", "additionalProperties": self._type_schema(m.group(1))}
        if t not in self.index.types:
            return {}
        return self.ref(self.add_model(t))

    def add_model(self, model: str) -> str:
        """Add the schema of a model class (and of what it references); its definition name."""
        name = self.index.definition_name(model)
        if name in self.schemas:
            return name
        schema: dict[str, Any] = {"type": "object"}
        self.schemas[name] = schema  # before recursing: types refer to themselves (JSONSchemaProps)
        cls = self.index.model(model)
        desc = _description(cls)
        if desc:
            schema["description"] = desc
        fields = getattr(cls, "model_fields", {})
        props: dict[str, Any] = {}
        required: list[str] = []
        for attr, wire in cls.attribute_map.items():  # type: ignore[attr-defined]
            t = self.index.types[model][attr]
            p = self._type_schema(t)
            f = fields.get(attr)
            if f is not None and f.description and "$ref" not in p:  # the client keeps none for references
                p["description"] = f.description
            if p.get("type") == "array" and t.startswith("List["):
                self._patch_extensions(wire, p, self.index.types.get(_element_type(t)), _element_type(t))
            if f is not None and f.is_required():
                required.append(wire)
            props[wire] = p
        if props:
            schema["properties"] = props
        if required:
            schema["required"] = sorted(required)
        return name

    @staticmethod
    def _patch_extensions(field: str, prop: dict[str, Any], item_types: dict[str, str] | None,
                          item_type: str = "") -> None:
        strategy = patch_strategy(field, item_type)
        key = patch_merge_key(field, item_type)
        if key is not None:
            if item_types is None or _snake_lookup(item_types, key) is None:
                return
            prop["x-kubernetes-patch-merge-key"] = key
        if strategy is not None and (key is not None or item_types is None):
            prop["x-kubernetes-patch-strategy"] = strategy

    def add_kind(self, cls: Any) -> tuple[str, str | None]:
        """Add a served kind and its list; their definition names (the list's None when unknown)."""
        group, _, version = cls.API_VERSION.rpartition("/")
        gvk = [{"group": group, "kind": cls.KIND, "version": version}]
        custom = getattr(cls, "openapi_schema", None)
        model = None if callable(custom) else self.index.model_for(group, version, cls.KIND)
        if model is None:
            name = _definition_name(group_package(group), version, cls.KIND)
            schema = dict(custom()) if callable(custom) else {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                               "metadata": self.ref(self.add_model("V1ObjectMeta"))}}
            schema["x-kubernetes-group-version-kind"] = gvk
            self.schemas[name] = schema
            list_name = name + "List"
            self.schemas[list_name] = {
                "type": "object", "required": ["items"],
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                               "items": {"type": "array", "items": self.ref(name)},
                               "metadata": self.ref(self.add_model("V1ListMeta"))},
                "x-kubernetes-group-version-kind": [{**gvk[0], "kind": cls.KIND + "List"}]}
            return name, list_name
        name = self.add_model(model)
        self.schemas[name]["x-kubernetes-group-version-kind"] = gvk
        list_name = None
        # A group-prefixed kind may have a plain list model (ResourceV1ResourceClaim, V1ResourceClaimList).
        list_model = model + "List" if model + "List" in self.index.types else \
            self.index.model_for(group, version, cls.KIND + "List")
        if list_model is not None and list_model in self.index.types:
            list_name = self.add_model(list_model)
            self.schemas[list_name]["x-kubernetes-group-version-kind"] = [{**gvk[0], "kind": cls.KIND + "List"}]
        return name, list_name


def _snake_lookup(types: dict[str, str], wire: str) -> str | None:
    """The attribute whose JSON name is ``wire`` (the model's attribute names are snake case)."""
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", wire).lower()
    return snake if snake in types else None


# ------------------------------------------------------------------------------- documents

_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
                "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_BOOL_PARAMS = frozenset(("allowWatchBookmarks", "sendInitialEvents", "watch", "force"))
_INT_PARAMS = frozenset(("limit", "timeoutSeconds", "gracePeriodSeconds"))


class _Resource:
    """One served REST resource: its kind, paths and schema names."""

    def __init__(self, group: str, version: str, kind: str, plural: str, namespaced: bool, schema: str,
                 list_schema: str | None, status: bool, smp: bool, verbs: tuple[str, ...]) -> None:
        self.group, self.version, self.kind, self.plural = group, version, kind, plural
        self.namespaced, self.schema, self.list_schema = namespaced, schema, list_schema
        self.status, self.smp, self.verbs = status, smp, verbs

    @property
    def gv_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


class _DocBuilder:
    """Paths and operations for one document; ``v3`` picks the OpenAPI 3.0 shapes."""

    def __init__(self, schemas: SchemaSet, v3: bool) -> None:
        self.s = schemas
        self.v3 = v3
        self.paths: dict[str, dict[str, Any]] = {}

    def _param(self, name: str, where: str = "query") -> dict[str, Any]:
        typ = "boolean" if name in _BOOL_PARAMS else "integer" if name in _INT_PARAMS else "string"
        p: dict[str, Any] = {"name": name, "in": where, "uniqueItems": True}
        if where == "path":
            p["required"] = True
        if self.v3:
            p["schema"] = {"type": typ, "uniqueItems": True}
            p.pop("uniqueItems")
        else:
            p["type"] = typ
        return p

    def _body(self, ref: dict[str, Any], content_types: Iterable[str]) -> dict[str, Any]:
        if self.v3:
            return {"requestBody": {"content": {ct: {"schema": ref} for ct in content_types}, "required": True}}
        return {"parameters": [{"name": "body", "in": "body", "required": True, "schema": ref}],
                "consumes": list(content_types)}

    def _responses(self, ref: dict[str, Any], codes: Iterable[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for code in codes:
            if self.v3:
                out[code] = {"description": "OK" if code == "200" else "Created" if code == "201" else "Accepted",
                             "content": {"application/json": {"schema": ref}, "application/yaml": {"schema": ref}}}
            else:
                out[code] = {"description": "OK" if code == "200" else "Created" if code == "201" else "Accepted",
                             "schema": ref}
        out["401"] = {"description": "Unauthorized"}
        return out

    def _op(self, r: _Resource, verb: str, action: str, kind: str, params: Iterable[str],
            response: dict[str, Any], codes: Iterable[str] = ("200",), body: dict[str, Any] | None = None,
            body_types: Iterable[str] = ("application/json", "application/yaml")) -> dict[str, Any]:
        op: dict[str, Any] = {
            "description": f"{verb} {kind}",
            "operationId": f"{verb}{'Namespaced' if r.namespaced else ''}{kind}",
            "tags": [f"{group_package(r.group)}_{r.version}"],
            "parameters": [self._param(p) for p in params],
            "responses": self._responses(response, codes),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        }
        if not self.v3:
            op["produces"] = ["application/json", "application/yaml"]
            op["schemes"] = ["https"]
        if body is not None:
            extra = self._body(body, body_types)
            if "parameters" in extra:
                op["parameters"] = extra.pop("parameters") + op["parameters"]
            op.update(extra)
        return op

    def add(self, r: _Resource) -> None:
        ref = self.s.ref(r.schema)
        lref = self.s.ref(r.list_schema) if r.list_schema else ref
        status_ref = self.s.ref("io.k8s.apimachinery.pkg.apis.meta.v1.Status")
        ns = "/namespaces/{namespace}" if r.namespaced else ""
        coll = f"{r.gv_path}{ns}/{r.plural}"
        item = f"{coll}/{{name}}"
        path_params = ([self._param("namespace", "path")] if r.namespaced else [])
        write = ("pretty", *_WRITE_PARAMS)
        verbs = set(r.verbs)
        c: dict[str, Any] = {"parameters": [*path_params, self._param("pretty")]}
        if "list" in verbs:
            c["get"] = self._op(r, "list", "list", r.kind, _LIST_PARAMS, lref)
        if "create" in verbs:
            c["post"] = self._op(r, "create", "post", r.kind, write, ref, ("200", "201", "202"), ref)
        if "deletecollection" in verbs:
            c["delete"] = self._op(r, "deletecollection", "deletecollection", r.kind,
                                   ("dryRun", "gracePeriodSeconds", *_LIST_PARAMS), status_ref)
        self.paths[coll] = c
        if "get" in verbs:
            i: dict[str, Any] = {"parameters": [self._param("name", "path"), *path_params, self._param("pretty")]}
            i["get"] = self._op(r, "read", "get", r.kind, (), ref)
            patch_types = (*_PATCH_TYPES, _SMP) if r.smp else _PATCH_TYPES
            if "update" in verbs:
                i["put"] = self._op(r, "replace", "put", r.kind, _WRITE_PARAMS, ref, ("200", "201"), ref)
            if "patch" in verbs:
                i["patch"] = self._op(r, "patch", "patch", r.kind, (*_WRITE_PARAMS, "force"), ref, ("200", "201"),
                                      self.s.ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch"), patch_types)
            if "delete" in verbs:
                i["delete"] = self._op(r, "delete", "delete", r.kind, ("dryRun", "gracePeriodSeconds"), ref,
                                       ("200", "202"))
            self.paths[item] = i
            if r.status:
                st: dict[str, Any] = {"parameters": list(i["parameters"])}
                st["get"] = self._op(r, "read", "get", r.kind + "Status", (), ref)
                st["get"]["x-kubernetes-group-version-kind"]["kind"] = r.kind
                st["put"] = self._op(r, "replace", "put", r.kind + "Status", _WRITE_PARAMS, ref, ("200", "201"), ref)
                st["patch"] = self._op(r, "patch", "patch", r.kind + "Status", (*_WRITE_PARAMS, "force"), ref,
                                       ("200", "201"), self.s.ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch"),
                                       patch_types)
                for op in ("put", "patch"):
                    st[op]["x-kubernetes-group-version-kind"]["kind"] = r.kind
                self.paths[f"{item}/status"] = st
        if r.namespaced and "list" in verbs:
            self.paths[f"{r.gv_path}/{r.plural}"] = {
                "parameters": [self._param("pretty")],
                "get": self._op(r, "list", "list", r.kind + "ForAllNamespaces", _LIST_PARAMS, lref)}
            self.paths[f"{r.gv_path}/{r.plural}"]["get"]["operationId"] = f"list{r.kind}ForAllNamespaces"


_INFO = {"title": "Kubernetes", "version": "v1.36.0"}
_STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


class ServedResource:
    """A resource to publish that is not a stored kind (e.g. SelfSubjectAccessReview: create only)."""

    def __init__(self, api_version: str, kind: str, plural: str, namespaced: bool = False,
                 verbs: tuple[str, ...] = ("create",)) -> None:
        self.API_VERSION = api_version
        self.KIND = kind
        self.PLURAL = plural
        self.NAMESPACED = namespaced
        self.VERBS = verbs


class OpenAPIDocuments:
    """The v2 document and the v3 documents for the kinds ``kinds()`` returns (read on every
    request: kinds registered at run time are published at once). Documents are built once per
    set of kinds and kept, serialized, with their hash (the ETag and the v3 index's ``hash=``)."""

    def __init__(self, kinds: Callable[[], Iterable[Any]], *, status_subresource: Callable[[str], bool],
                 extra: Iterable[ServedResource] = ()) -> None:
        self._kinds = kinds
        self._status = status_subresource
        self._extra = list(extra)
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._v2: tuple[bytes, bytes, str] | None = None
        self._v3: dict[str, tuple[bytes, str]] = {}

    def _resources(self, schemas: SchemaSet, only: tuple[str, str] | None = None) -> list[_Resource]:
        out = []
        for cls in [*self._kinds(), *self._extra]:
            group, _, version = cls.API_VERSION.rpartition("/")
            if only is not None and (group, version) != only:
                continue
            name, list_name = schemas.add_kind(cls)
            custom = getattr(cls, "openapi_schema", None)
            has_model = not callable(custom) and schemas.index.model_for(group, version, cls.KIND) is not None
            out.append(_Resource(group, version, cls.KIND, cls.PLURAL, bool(cls.NAMESPACED), name, list_name,
                                 self._status(cls.KIND), has_model, tuple(getattr(cls, "VERBS", _STANDARD_VERBS))))
        return out

    def _refresh(self) -> None:
        key = tuple(sorted((c.API_VERSION, c.KIND, c.PLURAL, bool(c.NAMESPACED), str(getattr(c, "SCHEMA_KEY", "")))
                           for c in [*self._kinds(), *self._extra]))
        if key != self._key:
            self._key = key
            self._v2 = None
            self._v3 = {}

    def group_versions(self) -> list[tuple[str, str]]:
        gvs = {tuple(c.API_VERSION.rpartition("/")[::2]) for c in [*self._kinds(), *self._extra]}
        return sorted(gvs)  # type: ignore[arg-type]

    @staticmethod
    def _common(schemas: SchemaSet) -> None:
        for n in ("V1Status", "V1DeleteOptions", "V1WatchEvent", "V1APIResourceList"):
            schemas.add_model(n)
        schemas.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Patch"] = {
            "type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes "
                                             "PATCH request body."}

    @staticmethod
    def _encode(doc: dict[str, Any]) -> tuple[bytes, str]:
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
        return body, hashlib.sha512(body).hexdigest().upper()

    def v2(self) -> tuple[bytes, bytes, str]:
        """The Swagger 2.0 document as JSON and as protobuf, and its hash."""
        with self._lock:
            self._refresh()
            if self._v2 is None:
                schemas = SchemaSet("#/definitions/")
                self._common(schemas)
                b = _DocBuilder(schemas, v3=False)
                for r in self._resources(schemas):
                    b.add(r)
                doc = {"swagger": "2.0", "info": _INFO, "paths": b.paths, "definitions": schemas.schemas,
                       "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization",
                                                               "in": "header"}},
                       "security": [{"BearerToken": []}]}
                body, etag = self._encode(doc)
                self._v2 = (body, encode_document(doc), etag)
            return self._v2

    def v3(self, group: str, version: str) -> tuple[bytes, str] | None:
        """The OpenAPI 3.0 document of one group-version (JSON) and its hash; None if not served."""
        with self._lock:
            self._refresh()
            key = f"{group}/{version}"
            if key not in self._v3:
                if (group, version) not in self.group_versions():
                    return None
                schemas = SchemaSet("#/components/schemas/")
                self._common(schemas)
                b = _DocBuilder(schemas, v3=True)
                for r in self._resources(schemas, (group, version)):
                    b.add(r)
                doc = {"openapi": "3.0.0", "info": _INFO, "paths": b.paths,
                       "components": {"schemas": schemas.schemas,
                                      "securitySchemes": {"BearerToken": {"type": "apiKey", "name": "authorization",
                                                                          "in": "header"}}}}
                self._v3[key] = self._encode(doc)
            return self._v3[key]

    def v3_index(self) -> dict[str, Any]:
        paths = {}
        for g, v in self.group_versions():
            rel = f"apis/{g}/{v}" if g else f"api/{v}"
            doc = self.v3(g, v)
            assert doc is not None
            paths[rel] = {"serverRelativeURL": f"/openapi/v3/{rel}?hash={doc[1]}"}
        return {"paths": paths}
