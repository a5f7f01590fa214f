"""Writing an estate back the way the person (or club-3090) wrote it: comments, key order, quoting
and the `compose:` spelling survive every `pod create` / `pod rm`.

The file on disk is loaded with ruamel.yaml's round-trip loader, its `estate:` list is brought in
line with the new Estate (entries matched by pod name keep their mapping, comments included; new
entries take the file's own slug key), and the document is dumped again. Reading still goes through
backend.strict_yaml (fast, aliases refused); this module only ever sees files that already passed it.
Past `MAX_ROUNDTRIP_BYTES` the pure-Python round trip would take seconds, so a very large estate is
written plainly (backend.estate.io.dump_estate) — comments in such a file are lost, and the
caller says so.
"""

from __future__ import annotations

import io
import re
from typing import Any

from backend.models.estate import Estate, Pod

MAX_ROUNDTRIP_BYTES = 512 * 1024
_SLUG_KEYS = ("slug", "compose", "compose_name")


def _yaml(old_text: str) -> Any:
    from ruamel.yaml import YAML

    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 200
    # ruamel writes one indentation for the whole document; take the list's from the file
    # (`estate:\n  - name` or `estate:\n- name`).
    match = re.search(r"^estate:[ \t]*(?:#.*)?\n(?:[ \t]*(?:#.*)?\n)*([ ]*)- ", old_text, re.MULTILINE)
    offset = len(match.group(1)) if match else 0
    rt.indent(mapping=2, sequence=offset + 2, offset=offset)
    return rt


def _flow(values: list[Any]) -> Any:
    from ruamel.yaml.comments import CommentedSeq

    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


def _slug_key(items: list[Any]) -> str:
    """The key the file's entries use for the slug (club-3090 writes `compose:`)."""
    for item in items:
        for key in _SLUG_KEYS:
            if hasattr(item, "keys") and key in item:
                return key
    return "slug"


def _same(old: Any, new: list[Any]) -> bool:
    try:
        return list(old) == new
    except TypeError:
        return False


def _update(item: Any, pod: Pod) -> None:
    key = next((k for k in _SLUG_KEYS if k in item), "slug")
    if item.get(key) != pod.slug:
        item[key] = pod.slug
    if not _same(item.get("gpus"), list(pod.gpus)):
        item["gpus"] = _flow(list(pod.gpus))
    if item.get("port") != pod.port:
        item["port"] = pod.port
    if pod.uuids is None:
        item.pop("uuids", None)
    elif not _same(item.get("uuids"), list(pod.uuids)):
        item["uuids"] = _flow(list(pod.uuids))
    if pod.on_demand and item.get("on_demand") is not True:
        item["on_demand"] = True
    elif not pod.on_demand:
        item.pop("on_demand", None)


def _new_item(pod: Pod, slug_key: str) -> Any:
    from ruamel.yaml.comments import CommentedMap

    item = CommentedMap()
    item["name"] = pod.name
    item[slug_key] = pod.slug
    item["gpus"] = _flow(list(pod.gpus))
    item["port"] = pod.port
    if pod.uuids is not None:
        item["uuids"] = _flow(list(pod.uuids))
    if pod.on_demand:
        item["on_demand"] = True
    return item


def dump_preserving(old_text: str, estate: Estate) -> str | None:
    """`estate` written over `old_text`'s layout, or None when the old text cannot be round-tripped
    (too large, not a mapping with an `estate:` list) and the plain writer should be used."""
    if not old_text.strip() or len(old_text.encode("utf-8", "replace")) > MAX_ROUNDTRIP_BYTES:
        return None
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.error import YAMLError

    rt = _yaml(old_text)
    try:
        doc = rt.load(old_text)
    except (YAMLError, ValueError, TypeError, RecursionError):
        return None
    if not isinstance(doc, CommentedMap):
        return None
    items = doc.get("estate")
    if items is None:
        items = CommentedSeq()
        doc["estate"] = items
    if not isinstance(items, CommentedSeq) or not all(isinstance(i, CommentedMap) for i in items):
        return None
    slug_key = _slug_key(list(items))
    by_name = {str(i.get("name", "")).casefold(): i for i in items}
    wanted = [p.name.casefold() for p in estate.pods]
    # Drop removed entries in place (keeps the comments attached to the others).
    for index in range(len(items) - 1, -1, -1):
        if str(items[index].get("name", "")).casefold() not in wanted:
            del items[index]
    for pod in estate.pods:
        item = by_name.get(pod.name.casefold())
        if item is None:
            items.append(_new_item(pod, slug_key))
        else:
            _update(item, pod)
    if len(items) and items.fa.flow_style():
        items.fa.set_block_style()  # `estate: []` that now holds pods reads better as a block list
    stamp = estate.extra.get("updated")
    if isinstance(stamp, str) and "updated" in doc:  # club-3090's stamp, refreshed by the caller
        doc["updated"] = stamp
    out = io.StringIO()
    rt.dump(doc, out)
    return out.getvalue()
