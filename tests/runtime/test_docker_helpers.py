"""Docker adapter helpers that need no daemon: error wording, container → workload."""

from __future__ import annotations

from types import SimpleNamespace

from backend.runtime.docker_adapter import _api_hint, _reason, _workload, container_name


def test_short_reasons_for_an_unreachable_daemon():
    assert _reason(Exception("('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))")) == "no socket there"
    assert _reason(Exception("Connection refused")) == "connection refused"
    assert "docker group" in _reason(PermissionError("Permission denied"))
    assert _reason(Exception("something\nelse")) == "something"


def test_api_hints():
    assert "another process holds that host port" in _api_hint("driver failed programming external connectivity: Bind for 0.0.0.0:8080 failed: port is already allocated")
    assert "--gpu-mode" in _api_hint('could not select device driver "nvidia" with capabilities: [[gpu]]')
    assert _api_hint("no space left on device") is None


def test_workload_from_a_container():
    container = SimpleNamespace(
        name="c3-chat",
        id="f" * 64,
        status="exited",
        labels={"io.c3.pod": "chat", "io.c3.slug": "vllm/x", "io.c3.estate": "/e.yml", "io.c3.gpus": "GPU-1,GPU-2"},
        attrs={"State": {"ExitCode": 137, "Pid": 0}, "HostConfig": {"PortBindings": {"8000/tcp": [{"HostIp": "", "HostPort": "8080"}]}}},
    )
    w = _workload(container)
    assert (w.pod, w.status, w.exit_code, w.host_port, w.gpu_uuids, w.pids) == ("chat", "exited", 137, 8080, ("GPU-1", "GPU-2"), ())
    assert container_name("chat") == "c3-chat"
