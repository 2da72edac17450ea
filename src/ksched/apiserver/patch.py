"""The three patch types kube-apiserver accepts: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and strategic merge patch (for the fields of the kinds ksched serves)."""

from __future__ import annotations

import copy
from typing import Any

from ksched.api.jsoncopy import deep_copy

__all__ = ["PatchError", "apply_patch", "json_patch", "merge_patch", "patch_merge_key", "patch_strategy",
           "strategic_merge_patch"]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch that cannot be applied (the API server answers 422 or 400)."""


def merge_patch(target: Any, patch: Any, owned: bool = False) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces.
    ``owned``: the caller hands the patch over (it built it for this call and will not touch
    it again): its values are taken as they are rather than copied."""
    if not isinstance(patch, dict):
        return patch if owned else deep_copy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v, owned)
    return out


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _walk(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"path not found: /{'/'.join(tokens)}")
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                cur = cur[int(t)]
            except (ValueError, IndexError) as e:
                raise PatchError(f"invalid index {t!r}") from e
        else:
            raise PatchError(f"cannot traverse into a scalar at {t!r}")
    return cur


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                i = int(last)
            except ValueError as e:
                raise PatchError(f"invalid index {last!r}") from e
            if i < 0 or i > len(parent):
                raise PatchError(f"index {i} out of range")
            parent.insert(i, value)
    else:
        raise PatchError("cannot add to a scalar")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    try:
        if isinstance(parent, dict):
            return parent.pop(last)
        if isinstance(parent, list):
            return parent.pop(int(last))
    except (KeyError, ValueError, IndexError) as e:
        raise PatchError(f"path not found: /{'/'.join(tokens)}") from e
    raise PatchError("cannot remove from a scalar")


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 operations on a copy of ``target``."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind = op["op"]
        tokens = _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            _walk(doc, tokens)
            if tokens:
                _remove(doc, tokens)
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "move":
            v = _remove(doc, _pointer(op.get("from", "")))
            doc = _add(doc, tokens, v)
        elif kind == "copy":
            v = copy.deepcopy(_walk(doc, _pointer(op.get("from", ""))))
            doc = _add(doc, tokens, v)
        elif kind == "test":
            if _walk(doc, tokens) != op.get("value"):
                raise PatchError(f"test failed at {op['path']}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc


# Patch merge keys of the list fields of the kinds ksched serves (from the Go struct tags);
# lists not named here are replaced as a whole, as in upstream.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "resourceClaimStatuses": "name",
    "reservedFor": "uid",
    "schedulingGates": "name",
    "readinessGates": "conditionType",
    "webhooks": "name",  # ValidatingWebhookConfiguration.webhooks
}
# Lists named like one above but holding items of another type: (field of the object holding
# the list, list field) -> merge key; the item type's name -> merge key (for the OpenAPI documents).
_MERGE_KEYS_IN = {("spec", "ports"): "port"}  # ServiceSpec.ports (patchMergeKey:"port")
_MERGE_KEY_OF_ITEM = {"ServicePort": "port"}
# Primitive lists with patchStrategy=merge: union.
_MERGE_PRIMITIVE = {"finalizers"}
# Lists whose items also keep only the keys of the patch's union member ($retainKeys).
_RETAIN_KEYS = {"volumes", "resourceClaimStatuses"}


def _item_merge_key(item_type: str) -> str | None:
    bare = item_type.lstrip("V0123456789") if item_type[:1] == "V" else item_type
    for prefix in ("alpha", "beta"):
        if bare.startswith(prefix):
            bare = bare.lstrip(prefix + "0123456789")
    return _MERGE_KEY_OF_ITEM.get(bare)


def patch_merge_key(field: str, item_type: str = "") -> str | None:
    """The merge key of a list field under strategic merge patch (None: replaced as a whole);
    ``item_type``: the client model of its items (``V1ServicePort``), when known."""
    return (_item_merge_key(item_type) if item_type else None) or _MERGE_KEYS.get(field)


def patch_strategy(field: str, item_type: str = "") -> str | None:
    """The patch strategy of a list field (OpenAPI's ``x-kubernetes-patch-strategy``)."""
    if item_type and _item_merge_key(item_type):
        return "merge"
    if field in _MERGE_PRIMITIVE:
        return "merge"
    if field in _MERGE_KEYS:
        return "merge,retainKeys" if field in _RETAIN_KEYS else "merge"
    return None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch with upstream's directives (``$patch``, ``$setElementOrder``,
    ``$deleteFromPrimitiveList``, ``$retainKeys``) and the merge keys of the served kinds."""
    return _smp(target, patch, "")


def _smp(target: Any, patch: Any, field: str) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys") or k.startswith("$setElementOrder/"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            cur = out.get(name)
            if isinstance(cur, list) and isinstance(v, list):
                out[name] = [x for x in cur if x not in v]
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, list) and isinstance(cur, list):
            out[k] = _merge_list(cur, v, k, field)
        elif isinstance(v, dict):
            r = _smp(cur, v, k)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
        else:
            out[k] = copy.deepcopy(v)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(cur: list[Any], patch: list[Any], field: str, parent: str = "") -> list[Any]:
    if field in _MERGE_PRIMITIVE:
        out = list(cur)
        for x in patch:
            if x not in out:
                out.append(x)
        return out
    key = _MERGE_KEYS_IN.get((parent, field)) or _MERGE_KEYS.get(field)
    if key is None or not all(isinstance(x, dict) for x in patch):
        if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
            return [x for x in patch if not (isinstance(x, dict) and "$patch" in x)]
        return copy.deepcopy(patch)
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [copy.deepcopy(x) for x in patch if "$patch" not in x]
    out = [copy.deepcopy(x) for x in cur]
    for item in patch:
        kv = item.get(key)
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == kv), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(_smp({}, item, field))
        else:
            out[idx] = _smp(out[idx], item, field)
    return out


def apply_patch(target: dict[str, Any], patch: Any, content_type: str) -> dict[str, Any]:
    ct = content_type.split(";")[0].strip()
    if ct == MERGE_PATCH:
        out = merge_patch(target, patch)
    elif ct == JSON_PATCH:
        out = json_patch(target, patch)
    elif ct == STRATEGIC_MERGE_PATCH:
        out = strategic_merge_patch(target, patch)
    else:
        raise PatchError(f"unsupported patch type {content_type!r}")
    if not isinstance(out, dict):
        raise PatchError("the patched object is not an object")
    return out
