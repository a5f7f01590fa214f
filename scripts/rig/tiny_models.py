"""Tiny random-weight models for the real-engine tests: `python tiny_models.py OUT_DIR` (run in the vLLM venv).

No download: a byte-level BPE tokenizer is trained on this Python's own standard-library sources, and
each model is a scaled-down config of an architecture family c3 prices, with weights from a fixed seed.
Two runs give byte-identical files. The text they write is gibberish: tests read protocol, token counts,
metrics and boot-log figures, never text.

Families (directory names): `dense` (Llama, GQA 4 heads / 2 KV heads), `sliding` (Gemma 3 text:
sliding-window layers mixed with global ones), `moe` (Qwen3-MoE), `mla` (DeepSeek-V2 latent attention),
`hybrid` (Qwen3-Next: Gated DeltaNet + attention), `nemotron_h` (Nemotron-H: Mamba-2 + attention + MLP
layers by `hybrid_override_pattern`, written as NVIDIA's hub config.json spells it) and `jamba` (Jamba:
Mamba-1 + attention by `attn_layer_period`/`attn_layer_offset`, MoE every other layer). Plus `tiny.gguf`, the dense model converted with
llama.cpp's own `convert_hf_to_gguf.py` (`$C3_CONVERTER`) for llama-server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VOCAB = 1024
SEED = 1234


def corpus() -> list[str]:
    """A few hundred KB of text every machine has: the first stdlib modules, sorted by name."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts, size = [], 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        size += len(text)
        if size > 400_000:
            break
    return texts


def tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 24, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def configs():
    from transformers import DeepseekV2Config, Gemma3TextConfig, JambaConfig, LlamaConfig, NemotronHConfig, Qwen3MoeConfig, Qwen3NextConfig

    common = dict(vocab_size=VOCAB, hidden_size=128, max_position_embeddings=4096, bos_token_id=0, eos_token_id=2,
                  pad_token_id=0, tie_word_embeddings=False)
    yield "dense", LlamaConfig(**common, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2)
    yield "sliding", Gemma3TextConfig(**common, intermediate_size=256, num_hidden_layers=6, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=32, sliding_window=256,
                                      layer_types=["sliding_attention"] * 5 + ["full_attention"])
    yield "moe", Qwen3MoeConfig(**common, intermediate_size=256, moe_intermediate_size=64, num_experts=8,
                                num_experts_per_tok=2, num_hidden_layers=3, num_attention_heads=4,
                                num_key_value_heads=1, head_dim=64, decoder_sparse_step=1, mlp_only_layers=[])
    yield "mla", DeepseekV2Config(**common, intermediate_size=256, moe_intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=None,
                                  qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=4,
                                  num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                                  topk_method="greedy", n_group=1, topk_group=1)
    yield "hybrid", Qwen3NextConfig(**common, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=32, linear_num_key_heads=2,
                                    linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
                                    linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                                    moe_intermediate_size=64, shared_expert_intermediate_size=64,
                                    layer_types=["linear_attention"] * 3 + ["full_attention"],
                                    full_attention_interval=4)
    # NVIDIA-Nemotron-Nano-9B-v2 scaled down (bench/data/configs): 7 Mamba-2, 2 attention, 7 MLP layers, 2 SSM
    # groups; ssm_state_size 64 makes the fp32 state page (35,072 B) outgrow one 128-token attention page
    # (32,768 B), so the engine must enlarge the block size.
    yield "nemotron_h", NemotronHConfig(**common, hybrid_override_pattern="M-M-M-M*-M-M-M*-", num_attention_heads=4,
                                        num_key_value_heads=2, head_dim=32, intermediate_size=256, mamba_num_heads=8,
                                        mamba_head_dim=16, n_groups=2, ssm_state_size=64, conv_kernel=4, expand=1,
                                        chunk_size=64)
    # AI21-Jamba-Mini-1.7 scaled down: attention at i % 8 == 4 (2 of 16 layers), Mamba-1 elsewhere.
    yield "jamba", JambaConfig(**common, intermediate_size=256, num_hidden_layers=16, num_attention_heads=4,
                               num_key_value_heads=2, attn_layer_period=8, attn_layer_offset=4, expert_layer_period=2,
                               expert_layer_offset=1, num_experts=4, num_experts_per_tok=2, mamba_d_state=16,
                               mamba_d_conv=4, mamba_expand=2)


#: Hub spelling of Nemotron-H's layer list (transformers >= 5 saves `layers_block_type` instead).
_PATTERN = {"linear_attention": "M", "mamba": "M", "mlp": "-", "full_attention": "*", "attention": "*", "moe": "E"}


def hub_config(cfg: dict) -> dict:
    """The config.json as the model's hub repo has it: Nemotron-H with `hybrid_override_pattern` and
    `num_hidden_layers`, and no `mamba_ssm_cache_dtype`, so the test proves c3's own default (vLLM
    model_executor/models/config.py:712 `NemotronHForCausalLMConfig`: float32 when the config has none)."""
    if cfg.get("model_type") == "nemotron_h" and "layers_block_type" in cfg:
        kinds = cfg.pop("layers_block_type")
        cfg["hybrid_override_pattern"] = "".join(_PATTERN[k] for k in kinds)
        cfg["num_hidden_layers"] = len(kinds)
        for key in ("mtp_layers_block_type", "mamba_ssm_cache_dtype"):
            cfg.pop(key, None)
    return cfg


def model(name: str, config, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(SEED)
    config.torch_dtype = torch.bfloat16
    net = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    net.save_pretrained(out, safe_serialization=True)
    # A stable config.json: transformers writes its own version into it; keep only what the engines read.
    cfg = json.loads((out / "config.json").read_text())
    cfg.pop("transformers_version", None)
    cfg = hub_config(cfg)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    gen = out / "generation_config.json"
    if gen.exists():
        gen.unlink()


def gguf(dense: Path, out: Path) -> None:
    """llama.cpp's converter; a locally trained BPE has a pre-tokenizer hash it does not know, and it is
    plain GPT-2 byte-level, so it is declared as `gpt-2` (`gpt2` is refused at load)."""
    converter = os.environ["C3_CONVERTER"]
    shim = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(converter).parent)!r})\n"
        "import convert_hf_to_gguf as c\n"
        "from conversion.base import TextModel\n"
        "TextModel.get_vocab_base_pre = lambda self, tokenizer: 'gpt-2'\n"
        "sys.argv = ['convert_hf_to_gguf.py', *sys.argv[1:]]\n"
        "c.main()\n"
    )
    subprocess.run([sys.executable, "-c", shim, str(dense), "--outtype", "f16", "--outfile", str(out)], check=True)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    tok_dir = out / "tokenizer"
    tokenizer(tok_dir)
    for name, config in configs():
        target = out / name
        model(name, config, target)
        for file in tok_dir.iterdir():
            (target / file.name).write_bytes(file.read_bytes())
    gguf(out / "dense", out / "tiny.gguf")
    print(f"tiny models in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
