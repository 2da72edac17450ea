"""Loading manifests: multi-document YAML (plain block style by ``ksched.api.blockyaml``, the rest
by PyYAML's C loader) and JSON, ``kind: List``, files and
directories, ``kubectl get ... -o yaml`` dumps.

Every problem is reported with where it is (file, document index, kind/name, field path); a
caller decides whether to go on. Nothing is half-loaded: :func:`load_manifests` returns the
valid objects and the errors separately.

Kinds are those of a :class:`Scheme` (the built-in ones by default) plus the custom kinds of
the CustomResourceDefinitions among the manifests themselves, so an operator's CRDs and its
custom resources load together. With ``unknown_kinds="skip"`` an object of a kind nobody
defines is set aside in :attr:`LoadResult.skipped` (by kind) instead of being an error.
Objects exported from an API server (they carry a ``resourceVersion`` or ``creationTimestamp``:
``kubectl get -o yaml`` dumps, snapshots) are marked :attr:`Manifest.existing`; their Events
are set aside too (they describe the other cluster's past).

Fast paths, each with its reference behind a flag: ``SHARE_POD_PARSE`` (pods of one spec share
a parse), ``LAZY_POD_REF`` (a pod's reference for its errors made only when it has one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ksched.api.apiextensions import CustomResourceDefinition
from ksched.api.blockyaml import read_documents
from ksched.api.kinds import UnknownKindError
from ksched.api.meta import KubeObject
from ksched.api.pod import Pod
from ksched.api.scheme import Scheme
from ksched.api.validation import LOADED_SPEC_KEY, pod_spec_key

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

# Short strings are shared: manifests repeat the same keys and values (labels, images,
# quantities) thousands of times, and every later copy of an object shares them too.
_STRINGS: dict[str, str] = {}
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _FastLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader (libyaml's parser and composer) with shortcuts that give equal objects:
    a plain scalar's implicit tag is resolved once per distinct value (manifests repeat the same
    keys and values thousands of times), mappings with plain string keys, sequences and strings
    are built directly from the composed nodes, and equal short strings are one object; every
    other node (numbers, booleans, timestamps, merge keys, explicit tags) goes through the safe
    constructor as before."""

    # The implicit tag of each plain scalar seen (without path resolvers it depends on the
    # value only).
    _resolved: dict[str, str] = {}

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        if not self.yaml_path_resolvers:
            # No path resolvers (the safe loader has none): descending into and out of a node
            # does nothing, and the composer need not call Python to be told so (a builtin of the
            # same arity that ignores its arguments' meaning; the result is not used).
            self.descend_resolver = {}.get
            self.ascend_resolver = tuple

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]
        if kind is ScalarNode:
            if not implicit[0]:
                return _STR  # quoted: a string
            tag = self._resolved.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(self._resolved) < 100_000:
                    self._resolved[value] = tag
            return tag
        return _MAP if kind is MappingNode else _SEQ

    def documents(self) -> Iterator[Any]:
        if len(_STRINGS) > 500_000:
            _STRINGS.clear()
        while self.check_node():
            doc = self._build(self.get_node(), {})
            self.constructed_objects = {}
            self.recursive_objects = {}
            yield doc

    def _build(self, node: Any, built: dict[int, Any]) -> Any:
        cls = node.__class__
        tag = node.tag
        if cls is ScalarNode:
            if tag == _STR:
                v = node.value
                return _STRINGS.setdefault(v, v) if len(v) <= 64 else v
            return self.construct_object(node, deep=True)
        got = built.get(id(node))
        if got is not None:
            return got  # an alias: the same object, as the safe constructor gives
        if cls is MappingNode and tag == _MAP:
            out: dict[Any, Any] = {}
            built[id(node)] = out
            for k, v in node.value:
                if k.__class__ is not ScalarNode or k.tag != _STR:
                    del built[id(node)]
                    return self.construct_object(node, deep=True)
                key = k.value
                out[_STRINGS.setdefault(key, key)] = self._build(v, built)
            return out
        if cls is SequenceNode and tag == _SEQ:
            seq: list[Any] = []
            built[id(node)] = seq
            for v in node.value:
                seq.append(self._build(v, built))
            return seq
        return self.construct_object(node, deep=True)


# Plain block-style files (what generators write) are read by ksched.api.blockyaml, which gives
# the same documents several times faster and declines any other text; False: PyYAML reads
# every file (the reference).
BLOCK_YAML = True


def _block_documents(text: str) -> list[Any] | None:
    """The documents of ``text`` if it is in ``blockyaml``'s subset (else None: PyYAML reads it)."""
    if not BLOCK_YAML:
        return None
    if len(_STRINGS) > 500_000:
        _STRINGS.clear()
    return read_documents(text, _STRINGS)


def _yaml_documents(text: str) -> Iterator[Any]:
    """Every document of ``text``, as ``yaml.load_all`` with the safe loader gives them."""
    loader = _FastLoader(text)
    try:
        yield from loader.documents()
    finally:
        loader.dispose()

__all__ = ["LoadError", "LoadResult", "Manifest", "build_objects", "iter_manifest_files", "load_manifests",
           "parse_documents", "read_manifests"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(slots=True)
class Manifest:
    """One object document and where it came from."""

    raw: dict[str, Any]
    source: str
    index: int  # document index in the file (0-based); List items share their List's index
    item: int | None = None  # index inside a kind: List

    @property
    def where(self) -> str:
        s = f"{self.source}[{self.index}]"
        if self.item is not None:
            s += f".items[{self.item}]"
        return s

    @property
    def existing(self) -> bool:
        """Exported from an API server: it carries what only a server sets."""
        md = self.raw.get("metadata")
        return isinstance(md, dict) and bool(md.get("resourceVersion") or md.get("creationTimestamp"))

    @property
    def kind_ref(self) -> str:
        """``Kind (apiVersion)``: how a skipped kind is named."""
        return f"{self.raw.get('kind') or '<no kind>'} ({self.raw.get('apiVersion') or '<no apiVersion>'})"

    @property
    def ref(self) -> str:
        md = self.raw.get("metadata") if isinstance(self.raw.get("metadata"), dict) else {}
        name = md.get("name") or md.get("generateName") or "<unnamed>"
        ns = md.get("namespace")
        kind = self.raw.get("kind") or "<no kind>"
        return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


@dataclass(slots=True)
class LoadError:
    """A problem with a file or a document: ``file[doc] Kind ns/name: path: message``."""

    source: str
    message: str
    index: int | None = None
    ref: str = ""
    path: str = ""
    # The object's kind is one nobody defines (it may be skipped instead).
    unknown_kind: bool = False

    def __str__(self) -> str:
        where = self.source if self.index is None else f"{self.source}[{self.index}]"
        parts = [where]
        if self.ref:
            parts.append(self.ref)
        msg = f"{self.path}: {self.message}" if self.path else self.message
        return f"{': '.join(parts)}: {msg}"


@dataclass(slots=True)
class LoadResult:
    objects: list[KubeObject] = field(default_factory=list)
    manifests: list[Manifest] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    # Objects of kinds nobody defines (with unknown_kinds="skip"), by "Kind (apiVersion)".
    skipped: dict[str, list[Manifest]] = field(default_factory=dict)
    # Events exported from another cluster, not loaded.
    skipped_events: list[Manifest] = field(default_factory=list)
    # The kinds the objects were built with (the given scheme plus the manifests' CRDs).
    scheme: Scheme | None = None


def iter_manifest_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """Files named on the command line, and manifest files under directories (sorted)."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith(MANIFEST_SUFFIXES) and not f.startswith("."):
                        yield Path(root) / f
        else:
            yield path


def parse_documents(text: str, source: str) -> tuple[list[Manifest], list[LoadError]]:
    """Split a file's text into object documents, flattening ``kind: List``."""
    docs: list[Any]
    errors: list[LoadError] = []
    stripped = text.lstrip()
    if source.endswith(".json") or stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
            docs = data if isinstance(data, list) else [data]
        except json.JSONDecodeError:
            docs = []
            try:
                docs = list(_yaml_documents(text))
            except yaml.YAMLError as e:
                return [], [LoadError(source, f"invalid JSON/YAML: {_yaml_msg(e)}")]
    else:
        docs = []
        block = _block_documents(text)
        try:
            if block is not None:
                docs = block
            else:
                for d in _yaml_documents(text):
                    docs.append(d)
        except yaml.YAMLError as e:
            errors.append(LoadError(source, f"invalid YAML: {_yaml_msg(e)}", index=len(docs)))
            # Documents before the broken one are still reported, never silently used.
    out: list[Manifest] = []
    for i, d in enumerate(docs):
        if d is None:
            continue
        if not isinstance(d, dict):
            errors.append(LoadError(source, f"expected an object, got {type(d).__name__}", index=i))
            continue
        kind = d.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in d:
            items = d.get("items")
            if not isinstance(items, list):
                errors.append(LoadError(source, "items must be a list", index=i, ref=str(kind), path="items"))
                continue
            for j, it in enumerate(items):
                if not isinstance(it, dict):
                    errors.append(LoadError(source, "expected an object", index=i, path=f"items[{j}]"))
                    continue
                out.append(Manifest(it, source, i, j))
        else:
            out.append(Manifest(d, source, i))
    return out, errors


def _yaml_msg(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def load_manifests(paths: Iterable[str | os.PathLike[str]], validate_objects: bool = True, *,
                   scheme: Scheme | None = None, unknown_kinds: str = "error") -> LoadResult:
    """Read, split, validate and parse every manifest under ``paths``."""
    res = LoadResult()
    manifests = read_manifests(paths, res)
    build_objects(manifests, res, validate_objects, scheme=scheme, unknown_kinds=unknown_kinds)
    return res


def read_manifests(paths: Iterable[str | os.PathLike[str]], res: LoadResult) -> list[Manifest]:
    """The object documents of every file under ``paths`` (problems reading and splitting them
    go to ``res.errors``)."""
    manifests: list[Manifest] = []
    for f in iter_manifest_files(paths):
        src = str(f)
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            res.errors.append(LoadError(src, f"cannot read: {e}"))
            continue
        found, errs = parse_documents(text, src)
        res.errors.extend(errs)
        manifests.extend(found)
    return manifests


def build_objects(manifests: Iterable[Manifest], res: LoadResult, validate_objects: bool = True, *,
                  scheme: Scheme | None = None, unknown_kinds: str = "error") -> LoadResult:
    """Build the objects of ``manifests`` into ``res``: CustomResourceDefinitions first, whose
    kinds the rest may use."""
    if unknown_kinds not in ("error", "skip"):
        raise ValueError(f"unknown_kinds: {unknown_kinds!r} (error or skip)")
    scheme = (scheme or Scheme()).copy()
    res.scheme = scheme
    manifests = list(manifests)
    crds = [m for m in manifests if m.raw.get("kind") == CustomResourceDefinition.KIND]
    for m in crds:
        obj, errs = build_object(m, validate_objects, scheme)
        if isinstance(obj, CustomResourceDefinition) and not errs and obj.storage_version \
                and scheme.names_conflict(obj) is None:
            scheme.add_crd(obj)
    like: dict[Any, Pod] | None = {} if SHARE_POD_PARSE else None
    for m in manifests:
        obj, merrs = build_object(m, validate_objects, scheme, like)
        if merrs and unknown_kinds == "skip" and obj is None and len(merrs) == 1 and merrs[0].unknown_kind:
            res.skipped.setdefault(m.kind_ref, []).append(m)
        elif merrs:
            res.errors.extend(merrs)
        elif obj is not None and obj.KIND_KEY == "Event" and m.existing:
            res.skipped_events.append(m)
        elif obj is not None:
            res.objects.append(obj)
            res.manifests.append(m)
    return res


# Pods of one app repeat their spec: the loader parses a validated pod whose spec, namespace
# and labels equal an earlier pod's with ``Pod.like`` (sharing that pod's parsed containers,
# affinity, spread constraints, ...). False is the reference: every pod parsed in full.
SHARE_POD_PARSE = True
_LIKE_MAX = 4096


def build_object(m: Manifest, validate_objects: bool = True, scheme: Scheme | None = None,
                 like: dict[Any, Pod] | None = None) -> tuple[KubeObject | None, list[LoadError]]:
    """The typed object of a manifest, or its errors (validated first unless told not to).
    ``like``: the pods parsed so far by spec key, namespace and labels (``Pod.like``)."""
    raw = m.raw
    idx = m.index
    scheme = scheme or Scheme()
    try:
        cls = scheme.kind_class(str(raw.get("apiVersion", "")), str(raw.get("kind", "")))
    except UnknownKindError as e:
        return None, [LoadError(m.source, str(e), idx, m.ref, f"{_item_prefix(m)}kind", unknown_kind=bool(e.kind))]
    # The object's reference (``m.ref``) names it in errors only. A pod's is made when there is
    # one (LAZY_POD_REF; a pod's validation and parse only read its manifest); any other
    # object's before validation, which may change a manifest (a custom object's pruning).
    ref = None if LAZY_POD_REF and cls is Pod else m.ref
    if validate_objects:
        ferrs = scheme.validate(raw, cls)
        if ferrs:
            ref = m.ref if ref is None else ref
            item_prefix = _item_prefix(m)
            return None, [LoadError(m.source, fe.message, idx, ref, item_prefix + fe.path) for fe in ferrs]
    try:
        if like is not None and validate_objects and cls is Pod:
            return _pod_like(raw, like), []
        return cls.from_dict(raw), []
    except (ValueError, TypeError, AttributeError) as e:
        ref = m.ref if ref is None else ref
        return None, [LoadError(m.source, f"cannot parse: {e}", idx, ref, _item_prefix(m).rstrip("."))]


# A pod's reference for its errors made only when it has one (``build_object``); False: every
# object's made first (the reference).
LAZY_POD_REF = True


def _item_prefix(m: Manifest) -> str:
    return f"items[{m.item}]." if m.item is not None else ""


def _pod_like(raw: dict[str, Any], like: dict[Any, Pod]) -> Pod:
    """``Pod(raw)`` for a validated pod manifest, from an earlier pod of ``like`` with the same
    spec, namespace and labels when there is one."""
    spec = raw.get("spec")
    key = pod_spec_key(spec)
    if key is None:
        return Pod(raw)
    md = raw.get("metadata") or {}
    labels = md.get("labels") or {}
    # Validated: the namespace and the label keys and values are strings.
    k = (key, md.get("namespace") or "", tuple(labels.items()))
    got = like.get(k)
    if got is not None:
        pod = got.like(raw)
    else:
        pod = Pod(raw)
        if len(like) >= _LIKE_MAX:
            like.clear()
        like[k] = pod
    # The spec's key, for the store's admission of this very spec (Store._admit_pod).
    pod.cached()[LOADED_SPEC_KEY] = (spec, key)
    return pod
