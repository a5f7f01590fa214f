"""Phase first_token (issue 24): a shard is serving only once one completion through the head returned a
token. /models answering is not enough: a pipeline stage can die on the first request (vLLM's CPU build
with PP and --enforce-eager did exactly that, after /models answered).

Both nodes are this machine (tests/shard/_local_runner.py, no SSH, no netns); the engine is the stand-in
vLLM (tests/shard/standin_vllm.py, mp backend), told to answer, fail or hang its completions."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend import first_token
from backend.errors import UsageError
from backend.shard.phases import parse_deadline, timing_with
from tests.shard.conftest import stop_c3
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("standin_vllm.py")


def start(tmp_path: Path, completion: str = "answer", first_token_s: float = 300) -> tuple[subprocess.Popen, Path, int]:
    """The two-node runner over the stand-in; its API port."""
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!{sys.executable}\nSTANDIN_COMPLETION = {completion!r}\n" + STANDIN.read_text())
    vllm.chmod(0o755)
    log = tmp_path / "runner.log"
    port = free_pair()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.shard._local_runner", str(vllm), str(port), str(first_token_s)], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log, port + 1


def free_pair() -> int:
    """A port P with P and P + 1 free on 127.0.0.1 now (the runner's rendezvous and API ports): other
    sessions on this machine run servers too."""
    for _ in range(50):
        port = random.randint(30000, 39000)
        try:
            for candidate in (port, port + 1):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise AssertionError("no two free ports in 30000–39001")


def ours(tmp_path: Path) -> list[int]:
    """Processes still running the stand-in this test wrote."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(tmp_path) in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def ended(proc: subprocess.Popen, log: Path) -> tuple[int, float, str]:
    """Wait for the runner to end by itself: its exit code, how long that took, its output."""
    started = time.monotonic()
    try:
        rc = proc.wait(timeout=90)
    finally:
        stop_c3(proc)
    return rc, time.monotonic() - started, log.read_text()


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("c3: error: ")]


def test_a_shard_is_serving_only_once_a_token_came_back(tmp_path):
    proc, log, api = start(tmp_path)
    try:
        wait_until(lambda: "c3: serving:" in log.read_text(), 60, "serving", interval=0.2, proc=proc, log=log)
        text = log.read_text()
        assert text.index("c3: ready: ") < text.index("c3: phase first_token: one completion (max_tokens 1, model org/m) to "
                                                     f"http://127.0.0.1:{api}/v1/completions (deadline 300s)")
        assert "c3: serving: first token ' world' from org/m after " in text
        assert "standin: completion asked (answer)" in text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        stop_c3(proc)
    wait_until(lambda: not ours(tmp_path), 10, "no stand-in left", interval=0.2)


def test_a_token_that_is_a_terminal_escape_is_shown_escaped(tmp_path):
    proc, log, _ = start(tmp_path, "hostile")
    try:
        wait_until(lambda: "c3: serving:" in log.read_text(), 60, "serving", interval=0.2, proc=proc, log=log)
    finally:
        stop_c3(proc)
    text = log.read_text()
    assert "c3: serving: first token '\\x1b]0;pwned\\x07 hi' from org/m after " in text
    assert "\x1b" not in text and "\x07" not in text


def test_an_error_answer_fails_phase_first_token_with_the_engines_message(tmp_path):
    proc, log, api = start(tmp_path, "fail")
    rc, _, text = ended(proc, log)
    assert rc == 1, text
    assert "c3: serving:" not in text and "Traceback" not in text
    assert error_lines(text) == [f"c3: error: phase first_token failed on node a: http://127.0.0.1:{api}/v1/completions answered HTTP 500: "
                                 "EngineCore encountered an issue. See stack trace (above) for the root cause."], text
    assert "  | standin: completion asked (fail)" in text  # the head's last lines come with it
    assert text.index("every node's part is stopped") < text.index("c3: error: ")
    wait_until(lambda: not ours(tmp_path), 10, "no stand-in left", interval=0.2)


def test_a_completion_that_never_answers_fails_at_the_first_token_deadline(tmp_path):
    proc, log, api = start(tmp_path, "hang", first_token_s=3)
    rc, seconds, text = ended(proc, log)
    assert rc == 1, text
    assert error_lines(text) == [f"c3: error: phase first_token failed on node a: no token from http://127.0.0.1:{api}/v1/completions "
                                 "within 3s (last: nothing asked yet)"], text
    assert "--deadline first_token=SECONDS" in text
    assert seconds < 45, seconds
    wait_until(lambda: not ours(tmp_path), 10, "no stand-in left", interval=0.2)


def test_a_rank_that_dies_while_the_first_completion_waits_is_named(tmp_path):
    proc, log, _ = start(tmp_path, "hang")
    try:
        wait_until(lambda: "standin: completion asked (hang)" in log.read_text(), 60, "the first completion asked", interval=0.2,
                   proc=proc, log=log)
        rank1 = next(pid for pid in ours(tmp_path) if b"--node-rank\x001\x00" in Path(f"/proc/{pid}/cmdline").read_bytes()
                     and b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes())
        os.kill(rank1, signal.SIGKILL)
    except BaseException:
        stop_c3(proc)
        raise
    rc, seconds, text = ended(proc, log)
    assert rc == 1, text
    (line,) = error_lines(text)
    assert line.startswith("c3: error: phase first_token failed on node b: vllm serve (rank 1, headless) exited with status ")
    assert line.endswith("before the first token came back"), line
    assert seconds < 30, seconds
    wait_until(lambda: not ours(tmp_path), 10, "no stand-in left", interval=0.2)


def test_first_token_is_a_deadline_phase():
    assert parse_deadline("first_token=45") == ("first_token", 45.0)
    assert timing_with({"first_token": 45.0}).first_token_s == 45.0
    with pytest.raises(UsageError, match="first_token"):
        parse_deadline("first-token=45")


@pytest.mark.parametrize(("status", "body", "token", "problem"), [
    (200, b'{"choices": [{"text": " world"}]}', " world", ""),
    (200, b'{"choices": [{"text": ""}]}', "", ""),  # end-of-text as the first token is still a token
    (200, b'{"choices": []}', None, "answered HTTP 200 without a completion choice"),
    (500, b'{"error": {"message": "boom\\nmore"}}', None, "answered HTTP 500: boom"),
    (400, b'{"message": "bad \\u001b[31mred"}', None, "answered HTTP 400: bad \\x1b[31mred"),
    (503, b"Loading model", None, "answered HTTP 503: Loading model"),
])
def test_an_answer_is_read_as_a_token_or_one_line(status, body, token, problem):
    answer = first_token.read_answer(status, body)
    assert (answer.token, answer.problem) == (token, problem)
    assert answer.again == (status == 503)


def test_ask_reads_a_chunked_answer_and_says_when_nothing_answers():
    async def go() -> tuple[first_token.Answer, first_token.Answer]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            body = b'{"choices": [{"text": "hi"}]}'
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            answered = await first_token.ask(f"http://127.0.0.1:{port}/v1", "m")
        nothing = await first_token.ask(f"http://127.0.0.1:{port}/v1", "m")
        return answered, nothing

    answered, nothing = asyncio.run(go())
    assert answered.token == "hi"
    assert nothing.token is None and nothing.again and nothing.problem.startswith("nothing answers on 127.0.0.1:")
