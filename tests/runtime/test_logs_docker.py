"""`DockerRuntime.logs(timestamps=True)` on the real dockerd: every line carries Docker's own RFC 3339
receive time, which the cockpit's log viewer parses (`widgets.log_view.LogLine`)."""

from __future__ import annotations

import time

from backend.runtime.docker_adapter import DockerRuntime, container_name
from widgets.log_view import LogLine


def test_logs_with_docker_timestamps(docker_client, stub_image):
    name = f"logstamp{int(time.time() * 1000) % 10**8}"
    container = docker_client.containers.run(stub_image, ["-c", "echo first line; printf 'tab\\there\\n'; echo last"], entrypoint=["sh"],
                                             name=container_name(name), detach=True)
    try:
        container.wait(timeout=30)
        runtime = DockerRuntime(docker_client, simulated_probe=True)
        plain = runtime.logs(name, tail=10).splitlines()
        assert plain == ["first line", "tab\there", "last"]
        stamped = runtime.logs(name, tail=10, timestamps=True).splitlines()
        parsed = [LogLine.parse(line) for line in stamped]
        assert [p.text for p in parsed] == ["first line", "tab     here", "last"]
        assert all(p.stamp is not None and len(p.stamp) == len("12-01 13:51:15.123") for p in parsed)
    finally:
        container.remove(force=True)
