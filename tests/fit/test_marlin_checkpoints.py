"""Issue 15, third pass: AWQ/GPTQ (Marlin-repacked) checkpoints on vLLM.

The three RTX 5090 validation rows (bench/data/bootlogs-validation.yaml, `v1-5090-*`) ran
`vllm/vllm-openai:v0.28.0` (pinned by digest in the same project notes). With that version known, c3
priced Qwen3-14B/32B-AWQ with Model Runner V2's lean terms and answered `fits`, 2.5–2.6 GiB optimistic.
The logs do not show a lean profile: 1.46 GiB of activation for both models (a 14B and a 32B with different
MLP widths, the same 151,936-token vocabulary at max_num_seqs 256) is a full-vocabulary sampler, not a
forward pass. No constant here is fitted to those rows; they are only asserted against.
"""

from __future__ import annotations

from backend.catalog.specs import shipped_spec
from backend.fit.overhead import SAMPLER_BYTES_PER_LOGIT, activation_gib, cudagraph_gib
from backend.fit.plan import Knobs, Rank
from backend.fit.vllm import price_vllm
from tests.fit.rows import boot_row

GIB = 1024**3
RTX_5090 = Rank(total_gib=31.36, sm="12.0", nvml_name="NVIDIA GeForce RTX 5090", nvml_total_gib=31.84)


def _awq_14b_knobs(**extra) -> Knobs:
    row = boot_row("v1-5090-qwen3-14b-awq-32k")
    spec = shipped_spec(row["model"])
    variant = next(v for v in spec.weights if v.name == row["weights"])
    fields = dict(
        util=row["util"], max_model_len=row["max_model_len"], version=(0, 28), weights_bytes=variant.bytes,
        quantized=True, quant_format=row["weights"],
    )
    return Knobs(**{**fields, **extra})


# -- vLLM's Model Runner V2 oracle (vllm/config/vllm.py `use_v2_model_runner` → `_is_default_v2_model_runner_model`,
#    `_get_v2_model_runner_unsupported_features`) was rolled out model class by model class, its first cut keyed on
#    `is_quantized` (vllm#42665: "We are very conservative about adding supported features"); the profiling sampler
#    itself changed kernels across versions (vllm#40376 made FlashInfer's top-k/top-p the default; MRv2 skips it while
#    profiling, vllm#57926). c3 cannot tell which profile a quantized dense model gets, so it prices the costliest
#    known one: the V1 full-vocabulary sort (38 B/logit, vllm/v1/sample/ops/topk_topp_sampler.py `apply_top_k_top_p`
#    with the dummy run's top_k = vocab − 1, top_p < 1) and the graph term.
def test_a_quantized_dense_model_is_not_priced_with_the_lean_mrv2_profile():
    row = boot_row("v1-5090-qwen3-14b-awq-32k")
    spec = shipped_spec(row["model"])
    report = price_vllm(spec, [RTX_5090], _awq_14b_knobs())
    assert report.gpus[0].activation_gib >= row["logged"]["activation_gib"]
    assert report.gpus[0].cudagraph_gib > 0.0
    # the lean MRv2 profile stays for the unquantized model of the same class (the v0.27.1 RTX 4090 row)
    lean = activation_gib(spec, tp=1, max_num_batched_tokens=2048, max_num_seqs=256, version=(0, 28))
    full = activation_gib(spec, tp=1, max_num_batched_tokens=2048, max_num_seqs=256, version=(0, 28), quantized=True)
    assert full >= 256 * spec.vocab_size * SAMPLER_BYTES_PER_LOGIT / GIB > lean
    assert cudagraph_gib(spec, pp=1, enforce_eager=False, version=(0, 28)) == 0.0
    assert cudagraph_gib(spec, pp=1, enforce_eager=False, version=(0, 28), quantized=True) > 0.0


# -- The 5090 boots' "11.22 GiB for consumed memory (weights + non-torch)" for a 9.29 GiB checkpoint is vLLM counting its
#    profile transient twice (v0.27-v0.30; tests/fit/test_profile_double_count.py), priced since the fifth pass; the
#    same box logged 0.45 GiB of non-torch for a pooling model with no sampler transient (Qwen3-Embedding-0.6B: consumed
#    1.57, `Model loading took 1.12 GiB`). What stays unpriced is the Marlin load itself: the weights term is the
#    checkpoint's size, and Marlin zero-pads tile-misaligned shapes at load (v0.28.0 marlin_utils.py `marlin_padded_nk`,
#    kernels/linear/mixed_precision/marlin.py `process_weights_after_loading`), so without `--weights-gib` an AWQ/GPTQ
#    verdict is never `fits`.
def test_an_awq_verdict_is_never_fits_and_says_why():
    spec = shipped_spec("Qwen/Qwen3-14B")
    roomy = _awq_14b_knobs(max_model_len=4096)
    report = price_vllm(spec, [RTX_5090], roomy)
    assert report.gpus[0].available_kv_gib > 5.0  # plenty of room: only the Marlin rule holds it back
    assert report.verdict == "tight"
    assert any("Marlin" in r and "--weights-gib" in r for r in report.reasons)
    gptq = price_vllm(spec, [RTX_5090], _awq_14b_knobs(max_model_len=4096, quant_format="gptq-int4"))
    assert gptq.verdict == "tight"
    plain = price_vllm(spec, [RTX_5090], Knobs(util=0.70, max_model_len=4096, version=(0, 28), weights_gib=27.5 * 0.5))
    assert not any("Marlin" in r for r in plain.reasons)


# -- vllm/model_executor/layers/quantization/mxfp4.py `get_mxfp4_backend`: only compute capability 10.0 takes
#    FlashInfer's MXFP4 MoE by default (`is_device_capability(100) and has_flashinfer()`); sm 9.0 takes the Triton
#    kernels (or Marlin) and below sm 9.0 Marlin. `Mxfp4MoEMethod.create_weights` pads every expert to the
#    kernel: Marlin rounds the intermediate size to 128 (and hidden to 256), FlashInfer on sm 10.0 both to 256.
#    gpt-oss (2880 × 2880): Marlin 2944 × 3072, FlashInfer 3072 × 3072. c3's 1.086 load factor was calibrated on a
#    Marlin-era H100 log (vllm#23278), so a B200 loads 3072/2944 = 4.3 % more than c3 priced: optimistic.
def test_mxfp4_experts_on_sm100_are_priced_with_flashinfer_padding():
    from backend.fit.weights import stage_weights_gib

    spec = shipped_spec("openai/gpt-oss-120b")
    variant = next(v for v in spec.weights if v.name == "mxfp4")
    knobs = Knobs(util=0.90, version=(0, 28), weights_bytes=variant.bytes, quantized=True, quant_format="mxfp4")
    hopper = stage_weights_gib(spec, knobs, sm="9.0")[0]
    blackwell = stage_weights_gib(spec, knobs, sm="10.0")[0]
    rope = spec.rope_cache_bytes / GIB
    assert abs((blackwell - rope) / (hopper - rope) - 3072 / 2944) < 1e-6
    assert stage_weights_gib(spec, knobs, sm="12.0")[0] == hopper  # RTX PRO 6000 / 5090: not the FlashInfer path
    b200 = price_vllm(spec, [Rank(total_gib=178.35, sm="10.0", nvml_name="NVIDIA B200")], knobs)
    assert b200.gpus[0].weights_gib == round(blackwell, 3)
