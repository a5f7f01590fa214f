"""llama.cpp's weights are a GGUF's tensor data, read from its header (backend/fit/gguf.py): the file minus its metadata,
from the aligned start of the data — what llama-server maps and reports as its model buffer. The real-engine check
against llama-server on the tiny GGUF is tests/real_engine/test_fit_oracle.py::test_llamacpp_weights_are_llama_servers_model_buffer."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from backend.errors import UsageError
from backend.fit.gguf import tensor_data_bytes
from tests.fit.test_cli import run

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "backend" / "catalog" / "models" / "Qwen__Qwen3-8B.config.json"


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf(path: Path, *, data: int, alignment: int | None = None, version: int = 3, magic: bytes = b"GGUF", tensors: int = 2) -> int:
    """A GGUF v3 whose metadata holds a string, a scalar and a string array (a vocabulary), and `data` bytes of tensor data;
    returns where its data starts."""
    kv = [s("general.name") + struct.pack("<I", 8) + s("tiny"), s("llama.block_count") + struct.pack("<II", 4, 2)]
    vocab = [f"tok{i}" for i in range(300)]
    kv.append(s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(vocab)) + b"".join(s(t) for t in vocab))
    if alignment is not None:
        kv.append(s("general.alignment") + struct.pack("<II", 4, alignment))
    infos = b"".join(s(f"blk.{i}.w") + struct.pack("<I", 2) + struct.pack("<QQ", 8, 8) + struct.pack("<IQ", 0, 256 * i) for i in range(tensors))
    head = magic + struct.pack("<IQQ", version, tensors, len(kv)) + b"".join(kv) + infos
    start = -(-len(head) // (alignment or 32)) * (alignment or 32)
    path.write_bytes(head)
    with path.open("r+b") as fh:
        fh.truncate(start + data)  # a sparse file: gigabytes of tensor data cost no disk
    return start


@pytest.mark.parametrize("alignment", [None, 64, 4096])
def test_the_weights_are_the_tensor_data_not_the_file(tmp_path, alignment):
    path = tmp_path / "m.gguf"
    start = gguf(path, data=1_000_000, alignment=alignment)
    assert tensor_data_bytes(path) == 1_000_000 == path.stat().st_size - start
    assert start % (alignment or 32) == 0 and start > 3000  # the vocabulary is in the file, not in the weights


@pytest.mark.parametrize(("kwargs", "why"), [
    (dict(magic=b"GGML"), "no GGUF magic"),
    (dict(version=1), "GGUF version 1"),
])
def test_a_file_that_is_not_a_gguf_is_one_usage_error(tmp_path, kwargs, why):
    path = tmp_path / "m.gguf"
    gguf(path, data=10, **kwargs)
    with pytest.raises(UsageError, match=why):
        tensor_data_bytes(path)


def test_truncated_huge_counts_and_fifos_are_refused_without_hanging(tmp_path):
    path = tmp_path / "m.gguf"
    gguf(path, data=10)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(UsageError, match="ends inside its header"):
        tensor_data_bytes(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0))
    with pytest.raises(UsageError, match="tensor count"):
        tensor_data_bytes(path)
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        tensor_data_bytes(fifo)
    with pytest.raises(UsageError, match="no such file"):
        tensor_data_bytes(tmp_path / "absent.gguf")


def test_c3_fit_prices_llamacpp_weights_from_the_gguf(capsys, tmp_path):
    path = tmp_path / "m.gguf"
    gguf(path, data=4_788_500_000)
    code, out, err = run(capsys, "fit", "--config", str(CONFIG), "--engine", "llamacpp", "--gguf", str(path), "--vram-gib", "23.56", "--tp", "1",
                         "--max-model-len", "8192", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["gpus"][0]["weights_gib"] == round(4_788_500_000 / 2**30, 6)
    assert "weights: tensor data of m.gguf: 4,788,500,000 bytes, read from its header" in data["notes"]


@pytest.mark.parametrize("extra", [("--engine", "vllm"), ("--engine", "llamacpp", "--weights-gib", "4")])
def test_gguf_goes_with_llamacpp_instead_of_weights_gib(capsys, tmp_path, extra):
    path = tmp_path / "m.gguf"
    gguf(path, data=10)
    code, _, err = run(capsys, "fit", "--config", str(CONFIG), "--gguf", str(path), "--vram-gib", "23.56", "--tp", "1", *extra)
    assert code == 2 and err.startswith("c3: error: --gguf goes with --engine llamacpp") and "Traceback" not in err
