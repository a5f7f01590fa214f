"""A random-weight llama.cpp model big enough that its memory is measurable (issue 28's budget test):
`python big_gguf.py TOKENIZER_DIR OUT_DIR` (run in the vLLM venv, like tiny_models.py).

The tiny dense model's family (Llama, GQA) scaled up to ~120 M parameters: `OUT_DIR/config.json` (what
c3's fit-check prices, as a catalog entry's `config_path`) and `OUT_DIR/big.gguf` (~245 MB of F16 tensor
data, llama.cpp's own converter). The HF weights are written to a scratch folder and dropped after the
conversion. Fixed seed: two runs give the same files. No download; the tokenizer is the tiny models' own.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

try:
    from scripts.rig.tiny_models import VOCAB, gguf, model
except ModuleNotFoundError:  # run as a file
    from tiny_models import VOCAB, gguf, model

LAYERS, HIDDEN, FFN, HEADS, KV_HEADS = 8, 1024, 4096, 8, 4
"""Per layer 4 Mi attention + 12 Mi MLP parameters: ~125 M in all, ~245 MB in F16."""


def config():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                       num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=4096,
                       bos_token_id=0, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)


def main(argv: list[str]) -> int:
    tok_dir, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="c3-big-gguf-", dir=out) as tmp:
        hf = Path(tmp) / "big"
        model("big", config(), hf)
        for file in tok_dir.iterdir():
            (hf / file.name).write_bytes(file.read_bytes())
        gguf(hf, out / "big.gguf")
        shutil.copy2(hf / "config.json", out / "config.json")
    print(f"big model in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
