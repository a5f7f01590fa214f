"""The ranges numbers from files and flags must lie in, in one place (issue 25).

A number c3 reads (a port in a recipe override, a memory fraction, a layer count in a config.json,
a size in GiB) feeds arithmetic: `1e308` hidden units overflowed a float, 10^18 layers built a
10^18-long tuple, a NaN fraction passed every `<` test. Each rule here makes such a value one
`ValueError` naming it (callers turn it into their UsageError, or pydantic into a validation error),
so what follows is bounded in time and memory. Plain functions, no pydantic: any layer may use them.
"""

from __future__ import annotations

import math
from typing import Any

PORT = (1, 65535)
"""A TCP port c3 binds or connects to (0 means "any", which no pod or router may ask for)."""
PORT_MIN, PORT_MAX = PORT
ANY_PORT = 0
"""A listener's "any free port" (the kernel picks one): only the router's and the gateway's own configs
accept it, since tests start them on loopback that way; `c3 pool serve --bind` and `c3 gateway serve
--bind` refuse it."""
GIB_MAX = 4096.0
"""The largest memory size in GiB c3 prices (a GPU, a rank's weights): far above any card."""

CONFIG_INTS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 4096), "n_layer": (1, 4096), "num_layers": (1, 4096),
    "hidden_size": (1, 1 << 20), "n_embd": (1, 1 << 20), "d_model": (1, 1 << 20),
    "num_attention_heads": (1, 1 << 16), "n_head": (1, 1 << 16),
    "num_key_value_heads": (1, 1 << 16), "n_head_kv": (1, 1 << 16),
    "head_dim": (1, 1 << 16), "vocab_size": (1, 1 << 24),
    "max_position_embeddings": (1, 1 << 30), "n_positions": (1, 1 << 30),
}
"""config.json fields with their own range: the ones every price multiplies by (the largest real
models have ~100 layers, 2^14 hidden units, 2^18 vocabulary and 10^7 positions)."""
CONFIG_INT_DEFAULT = (0, 1 << 32)
"""Any other whole number read from a config.json (ranks, experts, window sizes, intervals)."""
CONFIG_FLOAT_MAX = 1 << 20
"""A factor read from a config.json (rope scaling, partial rotary): finite, positive, at most this."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


def whole(value: Any, what: str, low: int, high: int) -> int:
    """`value` as an int in `low..high` (a whole float such as 32.0 counts); ValueError otherwise."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} is {_shown(value)}: not a whole number in {low}..{high}")
    return value


def port(value: Any, what: str = "port") -> int:
    """A TCP port, 1..65535."""
    return whole(value, what, *PORT)


def is_port(value: Any) -> bool:
    """`value` is a TCP port: an int (not a bool) in 1..65535. For callers with their own message."""
    return not isinstance(value, bool) and isinstance(value, int) and PORT_MIN <= value <= PORT_MAX


def port_text(text: str) -> int:
    """A port as typed (a flag, `--bind`'s PORT): ASCII digits only, at most 5 of them, in 1..65535. int()
    would take "٨٠٠٠" (Arabic-Indic digits), " 80" or "+80" and refuse "8²" with its own words; here every
    one of them is the same ValueError, which the CLI shows as it is."""
    digits = text.isascii() and text.isdigit() and len(text) <= 5
    if not digits or not is_port(int(text)):
        shown = text if len(text) <= 24 else text[:21] + "..."
        raise ValueError(f"`{shown}` is not a TCP port (a number from {PORT_MIN} to {PORT_MAX})")
    return int(text)


def real(value: Any, what: str, low: float, high: float, *, low_open: bool = False) -> float:
    """`value` as a finite float in [low, high] (or (low, high] with `low_open`); NaN and ±inf are refused."""
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is not None:
        try:
            number = float(number)
        except OverflowError:  # an integer beyond a float's range
            number = None
    ok = number is not None and math.isfinite(number) and (low < number if low_open else low <= number) and number <= high
    if not ok or number is None:
        bracket = "(" if low_open else "["
        raise ValueError(f"{what} is {_shown(value)}: not a finite number in {bracket}{low:g}, {high:g}]")
    return number


def fraction(value: Any, what: str) -> float:
    """A share of something (gpu_memory_utilization, mem_fraction_static): 0 < x ≤ 1."""
    return real(value, what, 0.0, 1.0, low_open=True)


def gib(value: Any, what: str) -> float:
    """A memory size in GiB: 0 ≤ x ≤ GIB_MAX."""
    return real(value, what, 0.0, GIB_MAX)


def config_int(key: str, value: Any) -> int:
    """A whole number from a config.json field, in that field's range."""
    return whole(value, f"`{key}`", *CONFIG_INTS.get(key, CONFIG_INT_DEFAULT))


def config_factor(key: str, value: Any) -> float:
    """A scaling factor from a config.json field."""
    return real(value, f"`{key}`", 0.0, CONFIG_FLOAT_MAX, low_open=True)
