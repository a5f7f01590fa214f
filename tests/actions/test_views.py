"""The typed views ARE the documented `--json` shapes: the fields docs/DESIGN.md promises, in order."""

from __future__ import annotations

import re
from pathlib import Path

from backend.runtime.models import ForeignProcess, Placement
from backend.views import PodStatus

DESIGN = (Path(__file__).resolve().parents[2] / "docs" / "DESIGN.md").read_text()


def _documented_pod_status() -> tuple[list[str], list[str], list[str]]:
    """(row fields, placement fields, added fields) as DESIGN writes them."""
    start = DESIGN.index("- `c3 pod status --json` →")
    shape = DESIGN[start: DESIGN.index("— `metrics` is null", start)]
    placement = re.search(r'"placement": \{(.*?)\}', shape, re.S)
    assert placement is not None
    row = re.findall(r'"(\w+)"', shape.replace(placement.group(0), '"placement"'))
    added = DESIGN[DESIGN.index("- `pod status --json` adds"):]
    added = added[: added.index("\n- ")]
    return [f for f in row if f not in {"file", "pods"}], re.findall(r'"(\w+)"', placement.group(1)), re.findall(r"`(\w+)`", added)


def test_pod_status_fields_are_the_documented_ones():
    row, placement, added = _documented_pod_status()
    assert row == ["name", "slug", "gpus", "port", "running", "serving", "placement", "metrics", "metrics_error", "restart_count", "usage"]
    fields = list(PodStatus.model_json_schema()["properties"])
    assert set(row) <= set(fields)
    assert [f for f in fields if f in row] == row  # in the documented order
    assert set(fields) - set(row) <= set(added), set(fields) - set(row) - set(added)  # nothing undocumented
    place = list(Placement.model_json_schema()["properties"])
    assert place[: len(placement)] == placement == ["verdict", "requested", "actual"]
    assert set(place) - set(placement) <= set(added)


def _row(**update) -> PodStatus:
    place = Placement(verdict="mismatch", requested=("GPU-a",), actual=("GPU-b",), requested_indices=(0,), actual_indices=(1,),
                      missing=("GPU-a",), extra=("GPU-b",), foreign=(ForeignProcess(pid=7, gpu_uuid="GPU-a", gpu_index=0, used_mib=9),), reason="r")
    return PodStatus(name="chat", slug="vllm/qwen3-8b", gpus=[0], port=8020, running=True, serving=False, state="running", placement=place).model_copy(update=update)


def test_the_json_row_is_plain_json_in_the_contract_order():
    data = _row().model_dump(mode="json")
    assert list(data) == ["name", "slug", "gpus", "port", "running", "serving", "state", "placement", "metrics", "metrics_error", "restart_count", "usage"]
    assert data["placement"] == {
        "verdict": "mismatch", "requested": ["GPU-a"], "actual": ["GPU-b"], "requested_indices": [0], "actual_indices": [1],
        "missing": ["GPU-a"], "extra": ["GPU-b"], "foreign": [{"pid": 7, "gpu_uuid": "GPU-a", "gpu_index": 0, "used_mib": 9, "owner": None}], "reason": "r",
    }
    other = _row(state="other-estate", other_estate="").model_dump(mode="json")
    assert list(other)[7:9] == ["placement", "other_estate"] and other["other_estate"] == ""


def _shape(command: str) -> str:
    start = DESIGN.index(f"- `{command} --json` →")
    end = min(DESIGN.index("\n- ", start + 3), DESIGN.index("\n\n", start))
    return DESIGN[start:end]


def _fields(text: str) -> list[str]:
    return re.findall(r'"(\w+)"', text)


def test_node_profile_and_pool_views_are_the_documented_shapes():
    from backend.views import NodeGpuStatus, NodeStatus, PoolBackendStatus, ProfileStatus, RankStatus

    node = _shape("c3 node status")
    gpus = re.search(r'"gpus": \[\{(.*?)\}\]', node)
    assert gpus is not None
    assert _fields(node.replace(gpus.group(0), '"gpus"'))[1:] == list(NodeStatus.model_fields)  # [0] is the "nodes" key
    assert _fields(gpus.group(1)) == list(NodeGpuStatus.model_fields)
    profile = _shape("c3 profile status")
    ranks = re.search(r'"nodes": \[\{(.*?)\}\]', profile, re.S)
    assert ranks is not None
    assert _fields(profile.replace(ranks.group(0), '"nodes"')) == list(ProfileStatus.model_fields)
    assert _fields(ranks.group(1)) == list(RankStatus.model_fields)
    pool = _fields(_shape("c3 pool status"))
    assert set(pool[1:]) <= set(PoolBackendStatus.model_fields)
    for model in (NodeStatus, NodeGpuStatus, ProfileStatus, RankStatus, PodStatus):
        undocumented = [name for name, field in model.model_fields.items() if not field.description]
        assert undocumented == [], (model.__name__, undocumented)


def test_pod_try_result_is_the_documented_shape():
    from backend.views.try_pod import TryResult

    assert _fields(_shape("c3 pod try NAME")) == list(TryResult.model_fields)
    assert [name for name, field in TryResult.model_fields.items() if not field.description] == []
