"""pid → container id from /proc/<pid>/cgroup, both cgroup versions."""

from __future__ import annotations

from pathlib import Path

from backend.runtime.cgroup import container_id_from_cgroup, container_id_of_pid, parent_pid, start_time

CID = "4f1c" + "a" * 60


def test_cgroup_v1_docker_path():
    text = f"12:devices:/docker/{CID}\n11:memory:/docker/{CID}\n0::/\n"
    assert container_id_from_cgroup(text) == CID


def test_cgroup_v2_systemd_scope_and_others():
    assert container_id_from_cgroup(f"0::/system.slice/docker-{CID}.scope\n") == CID
    assert container_id_from_cgroup(f"0::/kubepods.slice/pod1/cri-containerd-{CID}.scope\n") == CID
    assert container_id_from_cgroup(f"0::/machine.slice/libpod-{CID}.scope/container\n") == CID


def test_host_process_has_no_container():
    assert container_id_from_cgroup("0::/user.slice/user-0.slice/session-3.scope\n12:cpu:/\n") is None
    assert container_id_from_cgroup("0::/system.slice/" + "a" * 63 + ".scope\n") is None


def test_proc_readers(tmp_path: Path):
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cgroup").write_text(f"1:name=systemd:/docker/{CID}\n")
    stat = "42 (my (odd) name) S 7 42 42 0 -1 4194560 " + " ".join(["0"] * 12) + " 123456 rest"
    (tmp_path / "42" / "stat").write_text(stat)
    assert container_id_of_pid(42, tmp_path) == CID
    assert container_id_of_pid(43, tmp_path) is None
    assert parent_pid(42, tmp_path) == 7
    assert start_time(42, tmp_path) == 123456
