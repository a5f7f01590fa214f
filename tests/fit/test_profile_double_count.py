"""Issue 15, fifth pass: the RTX 5090 AWQ rows (vLLM v0.28.0) and the A10G AWQ row (v0.19.1).

RTX 5090, v0.28.0: "Actual usage is 11.22 GiB for consumed memory (weights + non-torch), 1.46 GiB for peak
activation" for Qwen3-14B-AWQ, whose load is 9.36 GiB (`Model loading took` on an L40S) — 1.86 GiB of
"non-torch". Read from vLLM's source at the rows' versions (wheels from PyPI):
- v0.28.0 vllm/utils/mem_utils.py:317 `result.total_consumed = before_create.free_memory −
  after_profile.free_memory`: "consumed" is the drop in device free memory after the profile run's
  `empty_cache()`, so a caching-allocator segment the run leaves pinned is counted there;
- v0.28.0 mem_utils.py:323 `transient_peak_headroom = torch_peak − torch_allocated` and gpu_worker.py:559
  `available = requested − (total_consumed + transient_peak_headroom) − cudagraph`: the same transient is also
  counted as peak activation;
- v0.28.0 gpu_worker.py:455 scopes `max_split_size_mb:20` around `load_model` only; the profile run at
  gpu_worker.py:515 runs without it. v0.31.0 gpu_worker.py:613–624 adds the scope around the profile run, with
  the comment "a later small allocation can be carved out of a freed multi-GiB block and pin the whole segment
  past the empty_cache() in memory_profiling, so it is counted as consumed and taken from the KV cache";
- v0.26.0 mem_utils.py:311 still summed `non_torch_increase + torch_peak_increase + weights_memory`, where a
  pinned segment is torch-reserved memory and counted nowhere: the double count exists from v0.27.0 to v0.30.x.
The same box's Qwen3-32B-AWQ boot at util 0.70 logged 0.33 GiB of activation and 18.62 GiB consumed (weights
+ 0.43); at 0.85 it logged 1.46 and 20.04 (+1.42 GiB, about its own activation again). c3 prices the bound
the source gives: on v0.27–v0.30 the profile transient may be counted twice.

A10G, v0.19.1: Qwen2.5-14B-AWQ leaves 1.38 GiB of activation + non-torch where c3 prices 0.94. v0.19.0
replaced awq_marlin's direct repack with `_convert_awq_to_standard_format` + MPLinearKernel
(v0.19.1 awq_marlin.py:72, :468; v0.18.0 calls `ops.awq_marlin_repack`); at v0.19.1 a pinned segment is not
counted (mem_utils.py above), and nothing in that path's source sizes the extra 0.44 GiB. c3 answers `unknown`
for exactly that setup (AWQ on Marlin, v0.19–v0.26).
"""

from __future__ import annotations

from backend.catalog.configs import load_config_file
from backend.catalog.specs import shipped_spec
from backend.fit.overhead import activation_gib, non_torch_gib
from backend.fit.plan import Knobs, Rank
from backend.fit.vllm import price_vllm
from tests.fit.rows import DATA, boot_row

ROOT = DATA.parents[1]

ROW_5090 = "v1-5090-qwen3-14b-awq-32k"
ROW_A10G = "v1-a10g-qwen25-14b-awq-4k"


def _5090(version: tuple[int, int] | None):
    row = boot_row(ROW_5090)
    spec = shipped_spec(row["model"])
    variant = next(v for v in spec.weights if v.name == row["weights"])
    knobs = Knobs(util=row["util"], max_model_len=row["max_model_len"], version=version, weights_bytes=variant.bytes,
                  quantized=True, quant_format=row["weights"])
    rank = Rank(total_gib=row["total_gib"], sm="12.0", nvml_name=row["nvml_name"], nvml_total_gib=31.84)
    return spec, row, price_vllm(spec, [rank], knobs)


def test_v027_to_v030_count_the_profile_transient_twice():
    spec, row, report = _5090((0, 28))
    g = report.gpus[0]
    base = non_torch_gib(tp=1, pp=1, total_gib=row["total_gib"], version=(0, 28))
    # the non-torch term carries the transient again (the runner by rule: a quantized dense model gets the costliest)
    transient = activation_gib(spec, tp=1, max_num_batched_tokens=2048, max_num_seqs=256, version=(0, 28), quantized=True)
    assert abs(g.non_torch_gib - (base + transient)) < 0.002, (g.non_torch_gib, base, transient)
    assert any("counted twice" in n for n in report.notes + report.reasons)
    # the logged boot (9.27 GiB of KV) is no longer over-promised
    assert report.available_kv_gib <= row["logged"]["available_kv_gib"], report.available_kv_gib
    for version in ((0, 26), (0, 31)):
        _, _, other = _5090(version)
        assert abs(other.gpus[0].non_torch_gib - non_torch_gib(tp=1, pp=1, total_gib=row["total_gib"], version=version)) < 0.002, version
        assert not any("counted twice" in n for n in other.notes + other.reasons), version


def test_an_unknown_version_is_priced_with_the_double_count():
    _, _, unknown = _5090(None)
    _, _, v026 = _5090((0, 26))
    assert unknown.gpus[0].non_torch_gib > v026.gpus[0].non_torch_gib + 1.0


def _a10g(version: tuple[int, int] | None, *extra: str):
    row = boot_row(ROW_A10G)
    spec = load_config_file(ROOT / row["config"])
    knobs = Knobs(util=row["util"], max_model_len=row["max_model_len"], version=version, quantized=True, quant_format="awq",
                  weights_gib=row["logged"]["weights_gib"], extra_args=extra)
    rank = Rank(total_gib=row["total_gib"], sm="8.6", nvml_name=row["nvml_name"], nvml_total_gib=22.49)
    return price_vllm(spec, [rank], knobs)


def test_awq_on_marlin_between_v019_and_v026_is_unknown():
    report = _a10g((0, 19))
    assert report.verdict == "unknown", (report.verdict, report.reasons)
    assert "_convert_awq_to_standard_format" in report.reasons[0]
    assert report.available_kv_gib is not None  # the figures are still shown, the verdict claims nothing
    for version in ((0, 18), (0, 27)):
        assert _a10g(version).verdict != "unknown", version
    # a forced `--quantization awq` runs vLLM's own AWQ GEMM kernel, which c3 prices (test_awq_gemm_kernel.py)
    assert _a10g((0, 19), "--quantization", "awq").verdict != "unknown"


def test_a_setup_that_fails_only_with_the_double_count_is_tight_not_refused():
    row = boot_row(ROW_5090)
    spec = shipped_spec(row["model"])
    variant = next(v for v in spec.weights if v.name == row["weights"])
    rank = Rank(total_gib=row["total_gib"], sm="12.0", nvml_name=row["nvml_name"], nvml_total_gib=31.84)

    def at(util: float):
        knobs = Knobs(util=util, max_model_len=4096, version=(0, 28), weights_bytes=variant.bytes, quantized=True, quant_format=row["weights"])
        return price_vllm(spec, [rank], knobs)

    # util 0.40: ~0.7 GiB of KV without the second copy (one 4096-token request needs 0.625), below zero with it
    maybe = at(0.40)
    assert maybe.available_kv_gib <= 0 and maybe.verdict == "tight", (maybe.available_kv_gib, maybe.verdict)
    assert "fits only if vLLM does not count its profile transient twice" in maybe.reasons[0]
    assert at(0.35).verdict == "wont-fit"  # fails either way
