"""Issue 15, fourth pass: an AWQ checkpoint served with vLLM's AWQ GEMM kernel instead of Marlin.

The validation row `v1-3090-qwen25-7b-awq-v0221` (bench/data/bootlogs-validation.yaml; vLLM 0.22.1 on an
RTX 3090, Qwen2.5-7B-Instruct-AWQ with `--quantization awq`) logs "Detected that the model can run with
awq_marlin, however you specified quantization=awq explicitly, so forcing awq" and 14.43 GiB of KV; c3 priced
it +0.29 GiB optimistic with the logged weights (+0.33 from the checkpoint). The row is asserted against,
never fitted to.

Why, from vLLM's source: vllm/model_executor/layers/quantization/awq.py `AWQLinearMethod.apply` sets
`FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256` and then runs
`out = ops.awq_dequantize(qweight, scales, qzeros, 0, 0, 0); out = torch.matmul(reshaped_x, out)`: at 256 tokens
or more every AWQ linear is dequantized to a full fp16 weight first. The profile run (max_num_batched_tokens
tokens) therefore peaks with the largest per-rank weight of the model in fp16 on top of the forward's
activations — Qwen2.5-7B's merged gate_up projection, 3584 × 2·18944 × 2 B = 0.253 GiB. Marlin
(awq_marlin.py, `AWQMarlinLinearMethod.apply` → `apply_awq_marlin_linear`) multiplies the packed weight in
place. vLLM converts AWQ to awq_marlin unless the user forces `quantization=awq`
(awq_marlin.py `AWQMarlinConfig.override_quantization_method`) or the GPU is below Marlin's compute
capability 8.0 (`check_marlin_supported`; AWQ's own kernel runs from 7.5, awq.py `get_min_capability`).
"""

from __future__ import annotations

from backend.catalog.specs import shipped_spec
from backend.fit.overhead import activation_gib, awq_dequant_bytes
from backend.fit.plan import Knobs, Rank
from backend.fit.vllm import price_vllm
from tests.fit.rows import boot_row

GIB = 1024**3
ROW = "v1-3090-qwen25-7b-awq-v0221"


def _rank(sm: str = "8.6") -> Rank:
    row = boot_row(ROW)
    return Rank(total_gib=row["total_gib"], sm=sm, nvml_name=row["nvml_name"], nvml_total_gib=24.0)


def _knobs(*extra_args: str, weights_gib: float | None = None) -> Knobs:
    row = boot_row(ROW)
    spec = shipped_spec(row["model"])
    variant = next(v for v in spec.weights if v.name == row["weights"])
    return Knobs(
        util=row["util"], max_model_len=row["max_model_len"], max_num_seqs=row["max_num_seqs"], max_num_batched_tokens=2048,
        version=(0, 22), weights_bytes=variant.bytes, weights_gib=weights_gib, quantized=True, quant_format=row["weights"],
        extra_args=extra_args,
    )


def test_the_forced_awq_kernel_row_is_no_longer_optimistic():
    row = boot_row(ROW)
    spec = shipped_spec(row["model"])
    logged = row["logged"]["available_kv_gib"]
    forced = price_vllm(spec, [_rank()], _knobs("--quantization", "awq", weights_gib=row["logged"]["weights_gib"]))
    assert -0.5 <= forced.available_kv_gib - logged <= 0.1, forced.available_kv_gib
    assert any("AWQ GEMM kernel" in n for n in forced.notes)


def test_the_dequantized_weight_is_the_largest_linear_of_one_rank():
    spec = shipped_spec("Qwen/Qwen2.5-7B-Instruct")
    gate_up = spec.hidden_size * 2 * spec.intermediate_size * 2
    assert awq_dequant_bytes(spec, tp=1, tokens=2048) == gate_up
    assert awq_dequant_bytes(spec, tp=2, tokens=2048) == gate_up // 2
    # below vLLM's 256-token threshold the fused awq_gemm runs on the packed weight
    assert awq_dequant_bytes(spec, tp=1, tokens=255) == 0
    plain = activation_gib(spec, tp=1, max_num_batched_tokens=2048, max_num_seqs=8, version=(0, 22), quantized=True)
    gemm = activation_gib(spec, tp=1, max_num_batched_tokens=2048, max_num_seqs=8, version=(0, 22), quantized=True, awq_gemm=True)
    assert abs((gemm - plain) - gate_up / GIB) < 1e-9


def test_marlin_stays_the_default_from_compute_capability_8():
    row = boot_row(ROW)
    spec = shipped_spec(row["model"])
    marlin = price_vllm(spec, [_rank("8.6")], _knobs())
    forced = price_vllm(spec, [_rank("8.6")], _knobs("--quantization=awq"))
    assert forced.gpus[0].activation_gib - marlin.gpus[0].activation_gib > 0.25
    assert not any("AWQ GEMM kernel" in n for n in marlin.notes)
    # `-q awq_marlin` keeps Marlin
    assert price_vllm(spec, [_rank("8.6")], _knobs("-q", "awq_marlin")).gpus[0].activation_gib == marlin.gpus[0].activation_gib


def test_below_marlins_compute_capability_awq_takes_the_gemm_kernel_unasked():
    spec = shipped_spec(boot_row(ROW)["model"])
    turing = price_vllm(spec, [_rank("7.5")], _knobs())
    ampere = price_vllm(spec, [_rank("8.6")], _knobs())
    assert turing.gpus[0].activation_gib - ampere.gpus[0].activation_gib > 0.25
    assert any("AWQ GEMM kernel" in n for n in turing.notes)
