"""`c3 bootlog`: an engine's boot log read back as the numbers the fit-check is compared with."""

from __future__ import annotations

import json
import subprocess
import sys

LOG = """\
(EngineCore_DP0 pid=311) INFO 11-20 10:00:01 [gpu_model_runner.py:2602] Model loading took 14.99 GiB memory and 21.46 seconds
(Worker_TP0 pid=400) INFO 11-20 10:00:05 [gpu_worker.py:298] Available KV cache memory: 4.49 GiB
(Worker_TP1 pid=401) INFO 11-20 10:00:05 [gpu_worker.py:298] Available KV cache memory: 4.41 GiB
(EngineCore_DP0 pid=311) INFO 11-20 10:00:06 [kv_cache_utils.py:1087] GPU KV cache size: 32,672 tokens
(EngineCore_DP0 pid=311) INFO 11-20 10:00:06 [kv_cache_utils.py:1091] Maximum concurrency for 16,384 tokens per request: 1.99x
"""


def c3(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "c3", *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_reports_weights_kv_tokens_and_concurrency_from_a_file(tmp_path):
    log = tmp_path / "boot.log"
    log.write_text(LOG)
    done = c3("bootlog", str(log), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["weights_gib"] == 14.99
    assert report["available_kv_gib"] == 4.41  # the minimum over ranks, as vLLM sizes the pool
    assert report["available_kv_gib_per_rank"] == [4.49, 4.41]
    assert report["kv_cache_tokens"] == 32672
    assert report["max_concurrency"] == 1.99
    assert report["max_model_len"] == 16384


def test_reads_stdin_and_prints_a_table():
    done = c3("bootlog", "-", stdin=LOG)
    assert done.returncode == 0, done.stderr
    assert "32,672" in done.stdout and "4.41 GiB" in done.stdout


def test_a_log_without_memory_lines_is_refused_in_one_line(tmp_path):
    log = tmp_path / "boot.log"
    log.write_text("INFO starting the API server\n")
    done = c3("bootlog", str(log))
    assert done.returncode == 1
    assert done.stderr.startswith("c3: error: no engine memory lines")
    assert "Traceback" not in done.stderr


def test_a_missing_file_is_a_usage_error(tmp_path):
    done = c3("bootlog", str(tmp_path / "nope.log"))
    assert done.returncode == 2
    assert done.stderr.startswith("c3: error: cannot read boot log")
