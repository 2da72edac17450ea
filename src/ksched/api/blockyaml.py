"""A reader for the plain block-style YAML that generated manifests are made of, giving exactly
what PyYAML's safe loader gives (``ksched.api.loader``), several times faster on such files.

It accepts only a small, strict subset of YAML and returns ``None`` for any text outside it; the
caller then reads that text with PyYAML, as before, which also gives the errors (line, column,
problem) of a malformed file. The subset, line by line (``\\n`` line ends, no tabs, no ``\\r``, no
trailing spaces; blank lines and whole-line comments of printable characters other than NEL, LS
and PS are skipped):

* documents separated by lines that are exactly ``---`` (the first may be implicit); every
  document a block mapping starting at column 0, nested at most about 100 levels deep;
* ``key: value`` and ``key:`` (a nested block follows, more indented, or a sequence at the key's
  own column) and ``- value`` / ``- key: value`` entries, each collection's entries at one
  column;
* keys: plain ``[A-Za-z0-9_./-]`` words of at most 1024 characters that PyYAML resolves to strings;
* values: plain scalars of printable ASCII without ``#``, flow indicators, quotes, ``: `` or a
  trailing ``:`` (resolved by PyYAML's own YAML 1.1 resolver, and built by its safe constructor
  when they are not strings: ``yes``, ``0644``, ``1_000``, ``~``, timestamps read as PyYAML reads
  them), single-quoted strings without ``'`` inside, double-quoted ones without ``\\`` or ``"``,
  and the empty ``{}`` and ``[]``.

Everything else (anchors, aliases, tags, merge keys, flow collections with content, block
scalars, multi-line scalars, ``key:`` with nothing after it, a top-level sequence, directives,
``...``) is left to PyYAML. Documents of one shape (the same lines but for their values: the
pods of one app) are built by replaying what building the first of them did (``PLANS``), the
steps written out as a function once a plan is replayed (``COMPILED_PLANS``). A text's distinct
lines are read once each, then its lines are looked up and cut into documents at its ``---``
lines in one pass (``SPLIT_DOCUMENTS``; the reference reads the text line by line), a "key:
value" line that differs from one read before only in its value taken from that line's parts
(``LINE_PREFIXES``). A plain
scalar no implicit resolver can apply to (by its first character) is a string without asking
PyYAML's resolver (``FAST_TAGS``).
Upstream has no such reader: kubectl reads YAML with
sigs.k8s.io/yaml (YAML 1.1 rules for these scalars), as PyYAML does.
"""

from __future__ import annotations

import re
import threading
from operator import itemgetter
from typing import Any

import yaml
from yaml.nodes import ScalarNode

__all__ = ["read_documents"]

_STR = "tag:yaml.org,2002:str"
# Plain scalars built by PyYAML's safe constructor (immutable values: built once per text).
_CONSTRUCTED = frozenset(("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
                          "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp"))

# One line: indentation, an optional "- ", then "key:" with an optional value, or a value.
_KEY = r"[A-Za-z0-9_./][A-Za-z0-9_./-]*"
_PLAIN = r"(?:[A-Za-z0-9_./~(]|-(?=[A-Za-z0-9.]))(?:[A-Za-z0-9_./~()+=@$^;-]|:(?=[^ ])| (?=[^ #]))*"
_VALUE = rf"{_PLAIN}|'[ -&(-~]*'|\"[ !#-\[\]-~]*\"|\{{\}}|\[\]"
_ENTRY = re.compile(rf"( *)(- )?(?:({_KEY}):(?: ({_VALUE}))?|({_VALUE}))").fullmatch
_VALUE_ONLY = re.compile(_VALUE).fullmatch

# A character of a comment that PyYAML reads as a line break (NEL, LS, PS: what follows it is
# content) or refuses (a non-printable one): the text is declined.
_NOT_IN_COMMENT = re.compile("[^ -~\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]").search

_resolver = yaml.SafeLoader("")
_tags: dict[str, str] = {}  # the implicit tag of each plain scalar seen


# A plain scalar whose first character no implicit resolver is registered for (nor any for every
# character, nor a path resolver) is a string without asking the resolver, and is not
# remembered (most such scalars are names, each seen once); False: every new scalar resolved by
# PyYAML's resolver and remembered (the reference).
FAST_TAGS = True


def _tag(text: str) -> str:
    tag = _tags.get(text)
    if tag is None:
        if FAST_TAGS and text:
            # (What Resolver.resolve does first: it looks the first character up, then the
            # wildcard resolvers; none of them, no path resolver: its default scalar tag.)
            found = _resolver.yaml_implicit_resolvers
            if text[0] not in found and None not in found and not _resolver.yaml_path_resolvers:
                return _resolver.DEFAULT_SCALAR_TAG  # type: ignore[no-any-return]
        tag = _resolver.resolve(ScalarNode, text, (True, False))
        if len(_tags) < 100_000:
            _tags[text] = tag
    return tag


# What a value token is: a scalar (immutable: shared), or a new empty mapping or sequence.
_SCALAR, _EMPTY_MAP, _EMPTY_SEQ = 0, 1, 2


def _scalar(text: str) -> tuple[int, Any]:
    """What a token of ``_VALUE`` is (its kind and, for a scalar, its value); raises _Decline
    when PyYAML would build it otherwise than this reader can."""
    c = text[0]
    if c == "'" or c == '"':
        return _SCALAR, text[1:-1]
    if c == "{":
        return _EMPTY_MAP, None
    if c == "[":
        return _EMPTY_SEQ, None
    tag = _tag(text)
    if tag == _STR:
        return _SCALAR, text
    if tag not in _CONSTRUCTED:
        raise _Decline
    try:
        # The tag's constructor itself (construct_object would keep the node and the value in
        # the shared loader's constructed_objects for ever).
        return _SCALAR, _resolver.yaml_constructors[tag](_resolver, ScalarNode(tag, text))
    except Exception:
        # Not buildable (0x_, 2001-02-30): PyYAML reports it, or a syntax error later in the
        # document, which it composes before building anything.
        raise _Decline from None


# Each distinct line read (generated manifests repeat most of their lines): (column, whether it
# is a sequence entry, the key or None, the value's kind and value, or None for "key:", and
# the line's shape: a small int naming (column, entry, key, whether it has a value), all that
# building a document reads of a line but the value it stores).
_Line = tuple[int, bool, "str | None", "tuple[int, Any] | None", int]
_SHAPES: dict[tuple[int, bool, str | None, bool], int] = {}
_SHAPES_LOCK = threading.Lock()


def _line(line: str, lines: dict[str, _Line], strings: dict[str, str]) -> _Line:
    m = _ENTRY(line)
    if m is None:
        raise _Decline
    ind_s, dash, key, value, item = m.groups()
    if key is not None:
        if _tag(key) != _STR or len(key) > 1024:
            # A key PyYAML reads as a number, a boolean, a merge key, ...; or longer than its
            # simple keys may be (an error there).
            raise _Decline
        val = None if value is None else _scalar(value)
    else:
        val = _scalar(item)
    if val is not None and val[0] == _SCALAR and val[1].__class__ is str and len(val[1]) <= 64:
        # The value as documents take it (`_value`): its string from ``strings``, once per line.
        val = (_SCALAR, strings.setdefault(val[1], val[1]))
    shape = (len(ind_s), dash is not None, key, val is not None)
    sid = _SHAPES.get(shape)
    if sid is None:
        with _SHAPES_LOCK:  # (one number per shape, whichever thread reads it first)
            sid = _SHAPES.get(shape)
            if sid is None:
                sid = len(_SHAPES)
                if sid < 100_000:
                    _SHAPES[shape] = sid
                else:
                    sid = -1  # (a shape not remembered: its documents are built line by line)
    parsed = (shape[0], shape[1], key, val, sid)
    lines[line] = parsed
    return parsed


def _value(value: tuple[int, Any], strings: dict[str, str]) -> Any:
    kind, v = value
    if kind == _SCALAR:
        if v.__class__ is str and len(v) <= 64:
            return strings.setdefault(v, v)
        return v
    return {} if kind == _EMPTY_MAP else []


class _Decline(Exception):
    """The text is outside the subset."""


def read_documents(text: str, strings: dict[str, str]) -> list[Any] | None:
    """Every document of ``text`` as ``yaml.load_all`` with the safe loader gives them, or None
    when the text is outside this reader's subset (module docstring). Equal strings of at most
    64 characters are taken from (and added to) ``strings``."""
    if "\t" in text or "\r" in text or "\ufeff" in text:
        return None
    try:
        if SPLIT_DOCUMENTS:
            return _documents_split(text, strings)
        return _documents(text, strings)
    except _Decline:
        return None


# What building a document did, step by step: (_SET, container, key, line) sets a key of a
# mapping to the line's value, (_ITEM, container, None, line) appends it to a sequence,
# (_MAP / _SEQ, container, key, 0) makes a new mapping / sequence at a key, (_ENTRY, container,
# None, 0) appends a new mapping to a sequence; containers are numbered as made, the root 0.
_SET, _ITEM, _MAP, _SEQ, _ENTRY_MAP = range(5)
_Plan = list[tuple[int, int, "str | None", int]]


# Documents of one shape (the same lines but for their values: the pods of one app) are built
# alike: the first one line by line (`_build`), which records what it did (`_Plan`); the next
# ones replay that with their own values (`_replay`). False is the reference: every document
# built line by line.
PLANS = True
_PLANS_MAX = 4096
_SHAPE_ID = itemgetter(4)  # (a _Line's shape number)
_plans: dict[tuple[int, ...], _Plan] = {}


# The text's distinct lines read first (each once, in any order: a line's reading does not
# depend on where it is), then its lines looked up in one pass and cut at the ``---`` lines
# (``_documents_split``); False: the text read line by line (``_documents``, the reference).
# The same documents, or a decline for the same texts: a text is declined when any of its lines
# is, or when its documents are (an empty one, a document _build refuses).
SPLIT_DOCUMENTS = True
# In ``_documents_split``, a line that is a "key: value" line read before but for its value
# (the name of each pod of a file) is read from that line's parts and its own value, without
# matching the whole line again; False: every line read by ``_line`` (the reference).
LINE_PREFIXES = True
_SKIP = object()  # a blank line or a whole-line comment
_SEP = object()  # a ``---`` line


def _documents_split(text: str, strings: dict[str, str]) -> list[Any]:
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()  # (the text's final line end: most texts have no other blank line)
    lines: dict[str, Any] = {}
    prefixes: dict[str, _Line] = {}  # (LINE_PREFIXES) a "key: value" line by its beginning
    skips = False
    for line in set(parts):  # (as _documents reads a line it has not read before)
        if not line or line[-1] == " " or line.lstrip(" ")[:1] == "#":
            if line.strip(" ") == "":
                lines[line] = _SKIP
                skips = True
                continue
            if line.lstrip(" ")[:1] == "#":
                if _NOT_IN_COMMENT(line) is not None:
                    raise _Decline
                lines[line] = _SKIP
                skips = True
                continue
            raise _Decline  # trailing spaces
        if line[0] in "-.%" and (line.startswith(("---", "...", "%"))):
            if line != "---":
                raise _Decline
            lines[line] = _SEP
            continue
        if LINE_PREFIXES:
            # A line made of a "key: value" line's beginning read before (its indentation, "- ",
            # key and ": ") and a value token is that line with this value: _ENTRY's groups are
            # the same (the key ends at the first ":"), as are the key's checks and the shape.
            cut = line.find(": ") + 2
            known = prefixes.get(line[:cut]) if cut > 1 else None
            if known is not None:
                text = line[cut:]
                if _VALUE_ONLY(text) is not None:
                    val = _scalar(text)
                    if val[0] == _SCALAR and val[1].__class__ is str and len(val[1]) <= 64:
                        val = (_SCALAR, strings.setdefault(val[1], val[1]))  # (as _line)
                    lines[line] = (known[0], known[1], known[2], val, known[4])
                    continue
            parsed = _line(line, lines, strings)
            if parsed[2] is not None and parsed[3] is not None:
                prefixes[" " * parsed[0] + ("- " if parsed[1] else "") + parsed[2] + ": "] = parsed
        else:
            _line(line, lines, strings)
    got: list[Any] = list(map(lines.__getitem__, parts))
    if skips:
        got = [g for g in got if g is not _SKIP]  # (skipped lines change nothing)
    # As _documents: content before the first "---" is a document (none: the first "---" opens
    # one); after each "---" a document, which may not be empty (an empty document, or an
    # explicit one at the end).
    docs: list[Any] = []
    n = len(got)
    try:
        i = got.index(_SEP)
    except ValueError:
        i = n
    if i:
        docs.append(_document(got[:i], strings))
    while i < n:
        start = i + 1
        try:
            i = got.index(_SEP, start)
        except ValueError:
            i = n
        if i == start:
            raise _Decline  # an empty document
        docs.append(_document(got[start:i], strings))
    return docs


def _documents(text: str, strings: dict[str, str]) -> list[Any]:
    docs: list[Any] = []
    lines: dict[str, _Line] = {}  # the lines of this text read so far
    doc: list[_Line] = []  # the current document's lines
    started = False  # a document is open (explicitly, or implicitly by content)
    for line in text.split("\n"):
        got = lines.get(line)
        if got is not None:  # a content line read before (the checks below passed it)
            doc.append(got)
            started = True
            continue
        if not line or line[-1] == " " or line.lstrip(" ")[:1] == "#":
            if line.strip(" ") == "":
                continue
            if line.lstrip(" ")[:1] == "#":
                if _NOT_IN_COMMENT(line) is not None:
                    raise _Decline
                continue
            raise _Decline  # trailing spaces
        if line[0] in "-.%" and (line.startswith(("---", "...", "%"))):
            if line != "---":
                raise _Decline
            if started:
                if not doc:
                    raise _Decline  # an empty document
                docs.append(_document(doc, strings))
            started = True
            doc = []
            continue
        doc.append(_line(line, lines, strings))
        started = True
    if doc:
        docs.append(_document(doc, strings))
    elif started:
        raise _Decline  # an explicit empty document
    return docs


def _document(doc: list[_Line], strings: dict[str, str]) -> dict[str, Any]:
    if not PLANS:
        return _build(doc, strings, None)
    key = tuple(map(_SHAPE_ID, doc))
    plan = _plans.get(key)
    if plan is not None:
        return _replay(plan, doc, strings)
    plan = []
    root = _build(doc, strings, plan)
    if -1 not in key:
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        _plans[key] = plan
    return root




# A plan replayed is compiled into a function doing its steps in a row (``_compile``); False:
# the steps interpreted one by one (``_replay_steps``, the reference).
COMPILED_PLANS = True
# id(plan) -> (the plan, its function): the plan itself is kept, so an id is never another's.
_compiled: dict[int, tuple[_Plan, Any]] = {}


def _replay(plan: _Plan, doc: list[_Line], strings: dict[str, str]) -> dict[str, Any]:
    if not COMPILED_PLANS:
        return _replay_steps(plan, doc, strings)
    got = _compiled.get(id(plan))
    if got is None or got[0] is not plan:
        if len(_compiled) >= _PLANS_MAX:
            _compiled.clear()
        got = _compiled[id(plan)] = (plan, _compile(plan))
    return got[1](doc)  # type: ignore[no-any-return]


def _compile(plan: _Plan) -> Any:
    """A function of a document's lines doing ``plan``'s steps as :func:`_replay_steps` does
    them, written out one after the other: each container a local, each key a constant (a key
    is a plain word: ``repr`` writes it as a literal); a line's string value is the one
    ``strings`` holds already (`_line` took it from there)."""
    out = ["def replay(doc):", " m0 = {}"]
    made = 0
    for op, c, k, i in plan:
        if op <= _ITEM:
            out.append(f" kind, v = doc[{i}][3]")  # (a string already from ``strings``: `_line`)
            out.append(" if kind:")
            out.append("  v = {} if kind == 1 else []")
            out.append(f" m{c}[{k!r}] = v" if op == _SET else f" m{c}.append(v)")
        else:
            made += 1
            new = "[]" if op == _SEQ else "{}"
            out.append(f" m{made} = {new}")
            out.append(f" m{c}[{k!r}] = m{made}" if op != _ENTRY_MAP else f" m{c}.append(m{made})")
    out.append(" return m0")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(out), "<blockyaml plan>", "exec"), namespace)  # (code written here, from a plan)
    return namespace["replay"]


def _replay_steps(plan: _Plan, doc: list[_Line], strings: dict[str, str]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    made: list[Any] = [root]
    setdefault = strings.setdefault
    for op, c, k, i in plan:
        if op <= _ITEM:
            kind, v = doc[i][3]  # type: ignore[misc]
            if kind == _SCALAR:  # (as _value)
                if v.__class__ is str and len(v) <= 64:
                    v = setdefault(v, v)
            else:
                v = {} if kind == _EMPTY_MAP else []
            if op == _SET:
                made[c][k] = v
            else:
                made[c].append(v)
        elif op == _MAP:
            new: dict[str, Any] = {}
            made[c][k] = new
            made.append(new)
        elif op == _SEQ:
            seq: list[Any] = []
            made[c][k] = seq
            made.append(seq)
        else:
            new = {}
            made[c].append(new)
            made.append(new)
    return root


def _build(doc: list[_Line], strings: dict[str, str], plan: _Plan | None) -> dict[str, Any]:
    """One document, line by line (raises _Decline outside the subset); what it does is
    appended to ``plan`` when given."""
    # The open collections, innermost last: (column of its entries, the dict or list, its number).
    stack: list[tuple[int, Any, int]] = []
    pending: tuple[dict[str, Any], str, int, int] | None = None  # "key:" waiting for its block
    root: dict[str, Any] | None = None
    made = 0  # containers made
    for i, (ind, dash, key, value, _) in enumerate(doc):
        if root is None:
            if ind or dash or key is None:
                raise _Decline  # a document is a block mapping at column 0
            root = {}
            stack = [(0, root, 0)]
        if pending is not None:
            pmap, pkey, pind, pnum = pending
            pending = None
            if dash and ind >= pind:
                seq: list[Any] = []
                pmap[pkey] = seq
                made += 1
                stack.append((ind, seq, made))
                if plan is not None:
                    plan.append((_SEQ, pnum, pkey, 0))
            elif not dash and ind > pind:
                new: dict[str, Any] = {}
                pmap[pkey] = new
                made += 1
                stack.append((ind, new, made))
                if plan is not None:
                    plan.append((_MAP, pnum, pkey, 0))
            else:
                raise _Decline  # "key:" with nothing after it (null)
        while stack[-1][0] > ind:
            stack.pop()
            if not stack:
                raise _Decline
        col, top, num = stack[-1]
        if not dash and top.__class__ is list and col == ind:
            stack.pop()  # a sequence at its key's column ends with the next key
            if not stack:
                raise _Decline
            col, top, num = stack[-1]
        if col != ind:
            raise _Decline
        if dash:
            if top.__class__ is not list:
                raise _Decline
            if key is None:
                top.append(_value(value, strings))  # type: ignore[arg-type]
                if plan is not None:
                    plan.append((_ITEM, num, None, i))
                continue
            # "- key: ...": a mapping whose entries are two columns further in.
            new = {}
            top.append(new)
            made += 1
            if plan is not None:
                plan.append((_ENTRY_MAP, num, None, 0))
            stack.append((ind + 2, new, made))
            top = new
            num = made
            ind += 2
        elif top.__class__ is not dict or key is None:
            raise _Decline
        if len(stack) > 100:
            raise _Decline  # deep enough that PyYAML, building recursively, may hit the recursion limit
        k = strings.setdefault(key, key)
        if value is None:
            pending = (top, k, ind, num)
        else:
            top[k] = _value(value, strings)
            if plan is not None:
                plan.append((_SET, num, k, i))
    if pending is not None or root is None:
        raise _Decline
    return root
