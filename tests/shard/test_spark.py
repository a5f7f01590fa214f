"""`c3 spark doctor` / `install-prereqs`: the check list with a fake dpkg, and the real CLI on this machine."""

from __future__ import annotations

import json
import subprocess
import sys

from backend.spark import PACKAGES, doctor, install_commands


def fake_runner(installed: set[str], gpus: str = ""):
    def run(argv: list[str]) -> tuple[int, str]:
        if argv[0] == "dpkg-query":
            return (0, "install ok installed") if argv[-1] in installed else (1, "")
        if argv[0] == "nvidia-smi":
            return (0, gpus) if gpus else (127, "")
        return 127, ""

    return run


def test_doctor_reports_missing_and_install_commands_name_only_those():
    report = doctor(run=fake_runner({"build-essential", "git"}, gpus="NVIDIA GB10\n"), nvcc=lambda: None)
    names = {i.name: i.present for i in report.items}
    assert names["build-essential"] and names["git"]
    assert not names["python3-dev"] and not names["ninja-build"] and not names["cuda-toolkit (nvcc)"]
    assert report.missing_apt == ["python3-dev", "ninja-build", "python3-venv"]
    assert report.gpus == ["NVIDIA GB10"] and not report.ok
    cmds = install_commands(report, root=False)
    assert cmds[0] == ["sudo", "-n", "apt-get", "update"]
    assert cmds[1][-3:] == ["python3-dev", "ninja-build", "python3-venv"]
    assert install_commands(report, root=True)[1][0] == "env"


def test_doctor_all_present():
    report = doctor(run=fake_runner({p for p, _ in PACKAGES}), nvcc=lambda: "/usr/local/cuda/bin/nvcc")
    assert report.ok and install_commands(report) == []


def test_cli_doctor_json_and_dry_run_on_this_machine():
    done = subprocess.run([sys.executable, "-m", "c3", "spark", "doctor", "--json"], check=False, capture_output=True, text=True, timeout=60)
    data = json.loads(done.stdout)
    assert done.returncode == (0 if data["ok"] else 1)
    assert {i["name"] for i in data["items"]} >= {"build-essential", "python3-dev", "ninja-build"}
    dry = subprocess.run([sys.executable, "-m", "c3", "spark", "install-prereqs", "--dry-run"], check=False, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0
    if data["missing_apt"]:
        assert "apt-get install" in dry.stdout and all(p in dry.stdout for p in data["missing_apt"])
    else:
        assert dry.stdout.startswith("nothing to install")
