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
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

from backend.errors import UsageError
from backend.text import show

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_NODES = 2_000_000
"""Scalars + collections per document: ~50 bytes of Python objects each, so memory stays far below
500 MB, and parsing stays within seconds. A 40,000-pod estate is ~400,000 nodes."""

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary")}
_MAP_TAG, _SEQ_TAG, _STR = _TAG + "map", _TAG + "seq", _TAG + "str"


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
    get_event = loader.get_event
    resolve = loader.resolve
    # Plain scalars whose first character starts no implicit type are strings: skip the resolver's
    # regexes for them (most names and slugs); the others are resolved once per distinct text.
    typed_starts = {k for k in loader.yaml_implicit_resolvers if k}
    resolved: dict[str, str] = {}
    construct = SafeConstructor.yaml_constructors
    stack: list[Any] = []  # open collections: list or _Mapping
    root: Any = None
    documents = 0
    nodes = 0
    try:
        while True:
            event = get_event()
            cls = type(event)
            if cls is ScalarEvent:
                tag = event.tag
                raw = event.value
                if tag is None or tag == "!":
                    if not event.implicit[0]:
                        tag = _STR  # quoted: a string
                    elif raw and raw[0] not in typed_starts:
                        tag = _STR
                    else:
                        tag = resolved.get(raw)
                        if tag is None:
                            tag = resolve(ScalarNode, raw, event.implicit)
                            if len(resolved) < 65536:
                                resolved[raw] = tag
                if tag is _STR or tag == _STR:
                    value: Any = raw
                elif tag in _SCALAR_TAGS:
                    value = construct[tag](loader, ScalarNode(tag, raw))
                elif tag == _TAG + "merge":
                    raise YamlRefused("merge keys (`<<`) are not accepted (write the keys out)", *_at(event))
                else:
                    raise YamlRefused(f"tag `{show(tag)}` is not accepted (plain values only)", *_at(event))
            elif cls is MappingStartEvent or cls is SequenceStartEvent:
                if event.tag not in (None, "!", _MAP_TAG, _SEQ_TAG):
                    raise YamlRefused(f"tag `{show(event.tag)}` is not accepted (plain mappings and lists only)", *_at(event))
                value = _Mapping() if cls is MappingStartEvent else []
            elif cls is MappingEndEvent or cls is SequenceEndEvent:
                done = stack.pop()
                value = done.data if cls is MappingEndEvent else done
                if not stack:
                    root = value
                else:
                    _attach(stack[-1], value, event)
                continue
            elif cls is AliasEvent:
                raise YamlRefused(f"alias `*{show(event.anchor)}` is not accepted (write the value out instead of using &anchors)", *_at(event))
            elif cls is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise YamlRefused("more than one YAML document (`---`) in the file", *_at(event))
                continue
            elif cls is StreamEndEvent:
                break
            else:  # stream start, document end
                continue
            nodes += 1
            if nodes > max_nodes:
                raise YamlRefused(f"more than {max_nodes:,} values in one file", *_at(event))
            if cls is not ScalarEvent:
                if stack and type(stack[-1]) is _Mapping and not stack[-1].has_key:
                    raise YamlRefused("a mapping key must be a plain value, not a list or mapping", *_at(event))
                stack.append(value)
            elif not stack:
                root = value
            else:
                parent = stack[-1]
                if type(parent) is list:
                    parent.append(value)
                else:
                    _attach(parent, value, event)
    finally:
        loader.dispose()
    return root


def _attach(parent: Any, value: Any, event: Any) -> None:
    if type(parent) is list:
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
