"""CEL device selectors of DRA (DeviceClass and request ``selectors[].cel.expression``), as
``staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go`` compiles and evaluates them.

The CEL runtime is Google's C++ implementation through ``cel-expr-python`` (type checker,
macros, ``cel.bind``, strings, math, optional types, encoders). The one variable is ``device``:

* ``device.driver``: the driver's name;
* ``device.attributes[domain][id]``: int, bool, string or a semantic version (a bare attribute
  id is under the driver's domain); an unknown domain is an empty map, an unknown id a runtime
  error ``no such key: <id>``;
* ``device.capacity[domain][id]``: a quantity;
* ``device.allowMultipleAllocations``: bool (DRAConsumableCapacity, on by default).

Kubernetes' libraries are provided as functions: ``quantity``/``isQuantity`` with
``isGreaterThan``, ``isLessThan``, ``compareTo``, ``add``, ``sub``, ``asInteger``,
``asApproximateFloat``, ``sign``, ``isInteger``; ``semver``/``isSemver`` (with ``normalize``)
with ``major``, ``minor``, ``patch``, ``isGreaterThan``, ``isLessThan``, ``compareTo``; and the
sets library (``sets.contains``, ``sets.equivalent``, ``sets.intersects``).

Compile errors read ``CEL compile error: ...``, runtime errors ``CEL runtime error: ...``; the
allocator prefixes them with the class or claim and the selector's index, as upstream.

Known divergences:

* quantities and versions are CEL maps carrying their exact value (``{"__quantity__":
  "<nano-units>"}``, ``{"__semver__": "<version>"}``) rather than opaque types, as the C++
  runtime's Python binding has no opaque values: ``==`` compares values as upstream's
  ``Equal`` does, but ``type(q)`` is a map and a map literal of that shape passes for one;
* no runtime cost limit (upstream stops an evaluation past 1,000,000 cost units): the C++
  runtime's binding does not count cost. Expressions are limited to 10 KiB as the apiserver
  validates; a selector nesting comprehensions over large literal lists may run long where
  upstream would fail it;
* an unknown domain is an empty map only when the expression names that domain as a string
  literal (every selector written as ``device.attributes["domain"]...``); a domain computed at
  run time is ``no such key``;
* compile error texts are those of the C++ checker, not cel-go's; the URL, IP, CIDR, regex
  (``find``/``findAll``), format and Kubernetes list libraries are not provided.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from fractions import Fraction
from threading import Lock
from typing import Any

from ksched.api.quantity import NANO, QuantityError, parse_quantity

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "CelError",
    "CompiledSelector",
    "compile_selector",
    "device_value",
    "quantity_value",
    "semver_value",
]

MAX_EXPRESSION_LENGTH = 10 * 1024
# Upstream's CELSelectorExpressionMaxCost (not enforced, see the module docstring).
SELECTOR_MAX_COST = 1_000_000

_Q = "__quantity__"
_SV = "__semver__"
_STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                     r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


class CelError(Exception):
    """A compile or runtime error; ``str()`` is the message upstream reports after the
    selector's position (``CEL compile error: ...``)."""


# ---------------------------------------------------------------- quantity and semver values


def quantity_value(nanos: int) -> dict[str, str]:
    return {_Q: str(nanos)}


def _q(v: Any) -> int:
    if isinstance(v, dict) and _Q in v:
        return int(v[_Q])
    raise ValueError("no such overload")


def _quantity(s: str) -> dict[str, str]:
    try:
        return quantity_value(parse_quantity(s).nanos)
    except QuantityError as e:
        raise ValueError(str(e)) from None


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def _parse_semver(s: str, normalize: bool = False) -> tuple[int, int, int, str]:
    text = s
    if normalize:
        if text.startswith("v"):
            text = text[1:]
        core, sep, rest = [*re.split(r"([-+])", text, maxsplit=1), "", ""] if re.search(r"[-+]", text) \
            else [text, "", ""]
        parts = core.split(".")
        while len(parts) < 3:
            parts.append("0")
        parts = [p.lstrip("0") or "0" for p in parts]
        text = ".".join(parts) + sep + rest
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"Invalid Semver '{s}'")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""


def semver_value(text: str, normalize: bool = False) -> dict[str, str]:
    """A version as the CEL map the selectors see (build metadata dropped: it does not take
    part in comparisons, so equal versions are equal maps)."""
    ma, mi, pa, pre = _parse_semver(text, normalize)
    return {_SV: f"{ma}.{mi}.{pa}" + (f"-{pre}" if pre else "")}


def _sv(v: Any) -> tuple[int, int, int, str]:
    if isinstance(v, dict) and _SV in v:
        return _parse_semver(v[_SV])
    raise ValueError("no such overload")


def _semver_cmp(a: tuple[int, int, int, str], b: tuple[int, int, int, str]) -> int:
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pa, pb = a[3], b[3]
    if pa == pb:
        return 0
    if not pa:
        return 1
    if not pb:
        return -1
    xa, xb = pa.split("."), pb.split(".")
    for x, y in zip(xa, xb):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:
            return -1 if xn else 1
        return -1 if x < y else 1
    return (len(xa) > len(xb)) - (len(xa) < len(xb))


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _Q in a:
        x, y = _q(a), _q(b)
        return (x > y) - (x < y)
    return _semver_cmp(_sv(a), _sv(b))


def _semver(s: str, normalize: bool = False) -> dict[str, str]:
    return semver_value(s, normalize)


def _is_semver(s: str, normalize: bool = False) -> bool:
    try:
        _parse_semver(s, normalize)
    except ValueError:
        return False
    return True


def _add(a: Any, b: Any) -> dict[str, str]:
    return quantity_value(_q(a) + (b * NANO if isinstance(b, int) else _q(b)))


def _sub(a: Any, b: Any) -> dict[str, str]:
    return quantity_value(_q(a) - (b * NANO if isinstance(b, int) else _q(b)))


def _as_integer(a: Any) -> int:
    n = _q(a)
    if n % NANO:
        raise ValueError("cannot convert value to integer")
    v = n // NANO
    if not -(1 << 63) <= v < (1 << 63):
        raise ValueError("cannot convert value to integer")
    return v


def _env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

    T = cel.Type
    M, S, B, N, D = T.MAP, T.STRING, T.BOOL, T.INT, T.DOUBLE
    L = T.List(T.DYN)

    def fn(name: str, *overloads: Any) -> Any:
        return cel.FunctionDecl(name, list(overloads))

    def ov(oid: str, ret: Any, params: list[Any], impl: Any, member: bool = False) -> Any:
        return cel.Overload(oid, ret, params, is_member=member, impl=impl)

    functions = [
        fn("quantity", ov("quantity_string", M, [S], _quantity)),
        fn("isQuantity", ov("is_quantity_string", B, [S], _is_quantity)),
        fn("semver", ov("semver_string", M, [S], _semver), ov("semver_string_bool", M, [S, B], _semver)),
        fn("isSemver", ov("is_semver_string", B, [S], _is_semver), ov("is_semver_string_bool", B, [S, B], _is_semver)),
        fn("isGreaterThan", ov("k8s_is_greater_than", B, [M, M], lambda a, b: _compare(a, b) > 0, True)),
        fn("isLessThan", ov("k8s_is_less_than", B, [M, M], lambda a, b: _compare(a, b) < 0, True)),
        fn("compareTo", ov("k8s_compare_to", N, [M, M], _compare, True)),
        fn("add", ov("quantity_add", M, [M, M], _add, True), ov("quantity_add_int", M, [M, N], _add, True)),
        fn("sub", ov("quantity_sub", M, [M, M], _sub, True), ov("quantity_sub_int", M, [M, N], _sub, True)),
        fn("asInteger", ov("quantity_as_integer", N, [M], _as_integer, True)),
        fn("isInteger", ov("quantity_is_integer", B, [M], lambda a: _q(a) % NANO == 0, True)),
        fn("asApproximateFloat", ov("quantity_as_float", D, [M], lambda a: float(Fraction(_q(a), NANO)), True)),
        fn("sign", ov("quantity_sign", N, [M], lambda a: (_q(a) > 0) - (_q(a) < 0), True)),
        fn("major", ov("semver_major", N, [M], lambda a: _sv(a)[0], True)),
        fn("minor", ov("semver_minor", N, [M], lambda a: _sv(a)[1], True)),
        fn("patch", ov("semver_patch", N, [M], lambda a: _sv(a)[2], True)),
        fn("sets.contains", ov("list_sets_contains_list", B, [L, L], lambda a, b: all(x in a for x in b))),
        fn("sets.equivalent", ov("list_sets_equivalent_list", B, [L, L],
                                 lambda a, b: all(x in b for x in a) and all(x in a for x in b))),
        fn("sets.intersects", ov("list_sets_intersects_list", B, [L, L], lambda a, b: any(x in b for x in a))),
    ]
    return cel.NewEnv(variables={"device": T.DYN}, functions=functions,
                      extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings(), ext_math.ExtMath(),
                                  ext_optional.ExtOptional(), ext_encoders.ExtEncoders()])


_ENV: Any = None
_ENV_LOCK = Lock()


def _get_env() -> Any:
    global _ENV
    if _ENV is None:
        with _ENV_LOCK:
            if _ENV is None:
                _ENV = _env()
    return _ENV


_NOT_FOUND = re.compile(r'^NOT_FOUND: Key not found in map : "((?:[^"\\]|\\.)*)"')
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")


def _runtime_message(text: str) -> str:
    m = _NOT_FOUND.match(text)
    if m is not None:
        return f"no such key: {m.group(1)}"
    return _STATUS_PREFIX.sub("", text, count=1)


class CompiledSelector:
    """A compiled selector; :meth:`matches` evaluates it for one device view."""

    __slots__ = ("domains", "expression", "program")

    def __init__(self, expression: str, program: Any, domains: frozenset[str]) -> None:
        self.expression = expression
        self.program = program
        # Domains the expression names as literals: missing ones are added as empty maps.
        self.domains = domains

    def matches(self, device: dict[str, Any]) -> bool:
        """True/False, or CelError ``CEL runtime error: ...``."""
        missing = [d for d in self.domains if d not in device["attributes"]]
        if missing:
            device = dict(device)
            attrs = dict(device["attributes"])
            for d in missing:
                attrs[d] = {}
            device["attributes"] = attrs
        try:
            r = self.program.eval(data={"device": device})
        except Exception as e:  # the binding raises for what the C++ runtime refuses outright
            raise CelError(f"CEL runtime error: {_runtime_message(str(e))}") from None
        v = r.value()
        if isinstance(v, bool):
            return v
        t = str(r.type().name()) if hasattr(r.type(), "name") else str(r.type())
        if t.upper() == "ERROR":
            raise CelError(f"CEL runtime error: {_runtime_message(str(v))}")
        raise CelError(f"CEL result of type {t.lower()} could not be converted to bool")


_CACHE: OrderedDict[str, CompiledSelector | CelError] = OrderedDict()
_CACHE_MAX = 256


def compile_selector(expression: str) -> CompiledSelector:
    """Compile (cached); raises CelError ``CEL compile error: ...``."""
    hit = _CACHE.get(expression)
    if hit is not None:
        if isinstance(hit, CelError):
            raise hit
        return hit
    try:
        out: CompiledSelector | CelError = _compile(expression)
    except CelError as e:
        out = e
    with _ENV_LOCK:
        _CACHE[expression] = out
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    if isinstance(out, CelError):
        raise out
    return out


def _compile(expression: str) -> CompiledSelector:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelError(f"CEL compile error: expression too long ({len(expression)} > {MAX_EXPRESSION_LENGTH})")
    env = _get_env()
    try:
        prog = env.compile(expression)
    except Exception as e:
        msg = _STATUS_PREFIX.sub("", str(e), count=1).strip()
        msg = re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", msg)
        raise CelError(f"CEL compile error: {msg}") from None
    rt = prog.return_type()
    name = rt.name() if hasattr(rt, "name") else str(rt)
    if name not in ("bool", "dyn", "BOOL", "DYN"):
        raise CelError(f"CEL compile error: must evaluate to bool or the unknown type, not {name.lower()}")
    domains = frozenset(a or b for a, b in _STRING_LITERAL.findall(expression))
    return CompiledSelector(expression, prog, domains)


def device_value(driver: str, attributes: dict[str, Any], capacity: dict[str, int],
                 allow_multiple_allocations: bool) -> dict[str, Any]:
    """The ``device`` variable for fully qualified attributes (values as :class:`Device` keeps
    them: int, bool, str or ``("version", text)``) and capacities (nano-units)."""
    attrs: dict[str, dict[str, Any]] = {}
    for name, v in attributes.items():
        domain, _, ident = name.rpartition("/")
        if isinstance(v, tuple):
            try:
                v = semver_value(v[1])
            except ValueError:
                continue
        attrs.setdefault(domain, {})[ident] = v
    caps: dict[str, dict[str, Any]] = {}
    for name, nanos in capacity.items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain, {})[ident] = quantity_value(nanos)
    return {"driver": driver, "attributes": attrs, "capacity": caps,
            "allowMultipleAllocations": allow_multiple_allocations}
