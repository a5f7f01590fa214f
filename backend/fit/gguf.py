"""What llama.cpp loads from a GGUF: its tensor data, read from the file's header (never the tensors themselves).

A GGUF is `magic, version, n_tensors, n_kv`, the metadata key/values (the tokenizer's vocabulary and merges among
them), one info record per tensor, then the tensor data from the next multiple of `general.alignment` (32 by
default) to the end of the file (ggml/src/gguf.cpp `gguf_init_from_file_impl`). llama-server maps that data region
and reports it as its model buffer (`CPU_Mapped model buffer size`, `CUDA0 model buffer size` when offloaded), so
the weights llama.cpp holds are the file minus its header: a published GGUF's size counts the metadata too, which
is 2.6 % of the tiny test model (its vocabulary) and a few MiB — a fraction of a percent — of a real one.

The header is read through a bounded, non-blocking reader: a FIFO or a device is refused, and counts and lengths
are capped so a corrupt file is one usage error, not a hang or a huge allocation.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO

from backend.errors import UsageError

MAX_HEADER = 512 * 1024 * 1024
"""Bytes of header read at most (a 256K-token vocabulary with its merges is tens of MiB)."""
MAX_COUNT = 1 << 24
"""Tensors, key/values, array items or string bytes at most."""
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class _Reader:
    """Little-endian fields from a file, counting what was read against MAX_HEADER."""

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh, self.path, self.pos = fh, path, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > MAX_HEADER:
            raise self.bad(f"its header runs past {MAX_HEADER // (1024 * 1024)} MiB")
        data = self.fh.read(n)
        if len(data) != n:
            raise self.bad("it ends inside its header")
        self.pos += n
        return data

    def unpack(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def count(self, what: str) -> int:
        n = int(self.unpack("Q"))
        if n > MAX_COUNT:
            raise self.bad(f"{what} {n:,} is over {MAX_COUNT:,}")
        return n

    def string(self) -> bytes:
        return self.take(self.count("a string length"))

    def value(self, kind: int) -> int | float | bool | bytes | None:
        """One metadata value; arrays are skipped (None)."""
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner = int(self.unpack("I"))
            for _ in range(self.count("an array length")):
                self.value(inner)
            return None
        if kind not in _SCALARS:
            raise self.bad(f"unknown metadata type {kind}")
        return self.unpack(_SCALARS[kind])

    def bad(self, why: str) -> UsageError:
        return UsageError(f"GGUF {self.path} cannot be read: {why}", hint="pass the .gguf file llama-server loads")


def tensor_data_bytes(path: Path) -> int:
    """Bytes of tensor data in the GGUF at `path` (what llama.cpp maps as its model buffer). UsageError when the
    file is not a regular GGUF."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise UsageError(f"GGUF {path}: no such file") from None
    except OSError as error:
        raise UsageError(f"GGUF {path} cannot be opened: {error.strerror or error}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"GGUF {path} is not a regular file")
        read = _Reader(fh, path)
        if read.take(4) != b"GGUF":
            raise read.bad("no GGUF magic")
        version = int(read.unpack("I"))
        if version not in (2, 3):
            raise read.bad(f"GGUF version {version} (c3 reads 2 and 3)")
        tensors, pairs = read.count("the tensor count"), read.count("the key/value count")
        alignment = 32
        for _ in range(pairs):
            key = read.string()
            value = read.value(int(read.unpack("I")))
            if key == b"general.alignment" and isinstance(value, int) and value > 0:
                alignment = value
        for _ in range(tensors):
            read.string()
            dims = int(read.unpack("I"))
            if dims > 8:
                raise read.bad(f"a tensor of {dims} dimensions")
            read.take(8 * dims + 4 + 8)  # dims, ggml type, offset
        start = -(-read.pos // alignment) * alignment
        if start > info.st_size:
            raise read.bad("its tensor data starts past its end")
        return info.st_size - start
