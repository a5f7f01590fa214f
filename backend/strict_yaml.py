"""YAML for files a person may have edited: libyaml's event stream, built into plain Python data here.

Why not `yaml.safe_load`: a 580-byte file of nested aliases ("billion laughs") expands into a
structure whose `repr()` or traversal exhausts memory, the same key written twice silently keeps the
last value, and the composer holds a node object (with two marks) per scalar, which made a
40,000-pod estate take seconds. Building the data straight from libyaml's events (the C parser when
PyYAML has it) lets one pass refuse aliases, merge keys (`<<`), duplicate keys and unknown tags
with their line, and stop after a bounded number of nodes. Scalars are typed exactly as
`yaml.safe_load` types them (YAML 1.1 resolver and SafeConstructor), so values do not change.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode

from backend.errors import UsageError
from backend.text import show

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_NODES = 2_000_000
"""Scalars + collections per document: ~50 bytes of Python objects each, so memory stays far below
500 MB, and parsing stays within seconds. A 40,000-pod estate is ~400,000 nodes."""

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary")}
_MAP_TAG, _SEQ_TAG = _TAG + "map", _TAG + "seq"


class YamlRefused(ValueError):
    """The document uses something c3 does not accept; `line` is 1-based (0 when unknown)."""

    def __init__(self, problem: str, line: int = 0, column: int = 0) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line
        self.column = column


def _at(event: Any) -> tuple[int, int]:
    mark = getattr(event, "start_mark", None)
    return (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)


class _Mapping:
    """A mapping under construction: keys so far (with their lines) and a pending key."""

    __slots__ = ("data", "lines", "key", "has_key")

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.lines: dict[Any, int] = {}
        self.key: Any = None
        self.has_key = False


def parse(text: str | bytes, *, max_nodes: int = MAX_NODES) -> Any:
    """The single document in `text` as dicts, lists and scalars (None for an empty document).

    Raises YamlRefused (aliases, merge keys, duplicate keys, unknown tags, non-scalar keys, too
    many nodes, more than one document) or yaml.YAMLError (syntax) — both carry the line.
    """
    loader = _Parser(text)
    resolve = loader.resolve
    construct = SafeConstructor.yaml_constructors
    stack: list[Any] = []  # open collections: list or _Mapping
    root: Any = None
    documents = 0
    nodes = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            kind = type(event).__name__
            if kind == "ScalarEvent":
                tag = event.tag
                if tag is None or tag == "!":
                    tag = resolve(ScalarNode, event.value, event.implicit)
                if tag == _TAG + "merge":
                    raise YamlRefused("merge keys (`<<`) are not accepted (write the keys out)", *_at(event))
                if tag not in _SCALAR_TAGS:
                    raise YamlRefused(f"tag `{show(tag)}` is not accepted (plain values only)", *_at(event))
                value: Any = event.value if tag == _TAG + "str" else construct[tag](loader, ScalarNode(tag, event.value))
            elif kind in ("MappingStartEvent", "SequenceStartEvent"):
                if event.tag not in (None, "!", _MAP_TAG, _SEQ_TAG):
                    raise YamlRefused(f"tag `{show(event.tag)}` is not accepted (plain mappings and lists only)", *_at(event))
                value = _Mapping() if kind == "MappingStartEvent" else []
            elif kind in ("MappingEndEvent", "SequenceEndEvent"):
                done = stack.pop()
                value = done.data if isinstance(done, _Mapping) else done
                if isinstance(done, _Mapping) and done.has_key:  # cannot happen with a valid event stream
                    raise YamlRefused("mapping ends after a key without a value", *_at(event))
                if not stack:
                    root = value
                    continue
                _attach(stack[-1], value, event, collection=True)
                continue
            elif kind == "AliasEvent":
                raise YamlRefused(f"alias `*{show(event.anchor)}` is not accepted (write the value out instead of using &anchors)", *_at(event))
            elif kind == "DocumentStartEvent":
                documents += 1
                if documents > 1:
                    raise YamlRefused("more than one YAML document (`---`) in the file", *_at(event))
                continue
            else:  # stream start/end, document end
                continue
            nodes += 1
            if nodes > max_nodes:
                raise YamlRefused(f"more than {max_nodes:,} values in one file", *_at(event))
            if isinstance(value, (list, _Mapping)):
                if stack and isinstance(stack[-1], _Mapping) and not stack[-1].has_key:
                    raise YamlRefused("a mapping key must be a plain value, not a list or mapping", *_at(event))
                stack.append(value)
                continue
            if not stack:
                root = value
            else:
                _attach(stack[-1], value, event, collection=False)
    finally:
        loader.dispose()
    return root


def _attach(parent: Any, value: Any, event: Any, *, collection: bool) -> None:
    if isinstance(parent, list):
        parent.append(value)
        return
    if not parent.has_key:
        line, column = _at(event)
        try:
            hash(value)
        except TypeError:
            raise YamlRefused("a mapping key must be a plain value", line, column) from None
        if value in parent.data:
            raise YamlRefused(f"duplicate key `{show(value)}` (first at line {parent.lines[value]})", line, column)
        parent.key, parent.has_key = value, True
        parent.lines[value] = line
        parent.data[value] = None
        return
    parent.data[parent.key] = value
    parent.has_key = False


def load(text: str | bytes, *, source: str, what: str, hint: str | None = None, max_nodes: int = MAX_NODES) -> Any:
    """`parse`, with every refusal or syntax error as one UsageError naming `what`, `source` and the line."""
    fix = hint or f"fix {source} by hand; c3 wrote nothing"
    try:
        return parse(text, max_nodes=max_nodes)
    except YamlRefused as error:
        at = f" at line {error.line}" if error.line else ""
        raise UsageError(f"{what} {source}{at}: {error.problem}", hint=fix) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "syntax error"
        raise UsageError(f"failed to parse {what} {source}: it is not valid YAML{at}: {show(problem, 80)}", hint=fix) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as error:  # e.g. a timestamp like 2024-13-45
        raise UsageError(f"{what} {source} holds a value YAML cannot read ({type(error).__name__})", hint=fix) from None
