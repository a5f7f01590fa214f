"""Replay public vLLM boot logs through c3's fit-check and print predicted vs logged figures.

    .venv/bin/python bench/fit_accuracy.py [--calibration FILE] [--validation FILE]

Two splits, reported apart: calibration rows (bench/data/bootlogs-calibration.yaml) are the ones the
non-KV constants were fitted to; validation rows (bench/data/bootlogs-validation.yaml) were never used
to fit anything (out of sample). Every point is cited in its data file. For each `full` point the available KV memory is predicted
twice: from scratch (weights from weights.csv) and with the logged weights (which isolates the
activation / non-torch / CUDA-graph model). Error = predicted − logged: positive means c3 was
optimistic (it promised more KV than vLLM found), which is the direction that must stay under 1 GiB.
`kv` points check only the KV arithmetic (bytes/token, tokens and concurrency from the logged
budget); `weights` points check the per-rank weights. Prints figures; never fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.catalog.configs import load_config_file  # noqa: E402
from backend.catalog.specs import shipped_spec  # noqa: E402
from backend.fit import fit_config  # noqa: E402
from backend.fit.kvspec import kv_layout  # noqa: E402
from backend.fit.plan import Knobs, parse_version  # noqa: E402
from backend.fit.weights import rank_weights_gib  # noqa: E402

GIB = 1024**3


def spec_of(point):
    if point.get("config"):
        return load_config_file(ROOT / point["config"])
    return shipped_spec(point["model"])


def variant(spec, name):
    return next((v for v in spec.weights if v.name == name), None)


def knobs(point, spec, weights_gib=None):
    v = variant(spec, point.get("weights"))
    return Knobs(
        engine=point.get("engine", "vllm"),
        tp=point.get("tp", 1),
        pp=point.get("pp", 1),
        util=point["util"],
        max_model_len=point.get("max_model_len"),
        max_num_seqs=point.get("max_num_seqs"),
        max_num_batched_tokens=point.get("max_num_batched_tokens"),
        kv_cache_dtype=point.get("kv_cache_dtype", "auto"),
        enforce_eager=point.get("enforce_eager", False),
        extra_args=tuple(point.get("extra_args", ())),
        version=parse_version(point.get("version")),
        weights_bytes=v.bytes if v else None,
        weights_gib=weights_gib,
        quantized=v is not None and v.name not in ("bf16", "fp16"),
        quant_format=v.name if v is not None else None,
    )


def kv_check(point, spec):
    """(bytes/token, tokens (old line), concurrency, tokens logged, conc logged, need GiB, need logged, block, block logged)."""
    tp, pp = point.get("tp", 1), point.get("pp", 1)
    layout = kv_layout(spec, tp=tp, pp=pp, kv_cache_dtype=point.get("kv_cache_dtype", "auto"))
    logged = point["logged"]
    length = point.get("max_model_len") or spec.max_position_embeddings
    batched = point.get("max_num_batched_tokens") or 2048
    block = (layout.block_size, logged.get("block_size"))
    if "kv_needed_gib" in logged:
        return (layout.bytes_per_token, None, None, None, None, round(layout.bytes_per_token * length / GIB, 3), logged["kv_needed_gib"], *block)
    avail = logged.get("available_kv_gib")
    if avail is None:
        return (layout.bytes_per_token, None, None, None, None, None, None, *block)
    blocks = layout.num_blocks(avail * GIB)
    conc = blocks / layout.blocks_per_request(length, batched)
    if "kv_cache_tokens_new" in logged:
        tokens, tokens_logged = int(conc * length), logged["kv_cache_tokens_new"]
    else:
        tokens, tokens_logged = blocks // len(layout.groups) * layout.block_size, logged.get("kv_cache_tokens")
    return (layout.bytes_per_token, tokens, round(conc, 2), tokens_logged, logged.get("max_concurrency"), None, None, *block)


def card_class(point) -> str:
    """The card class a row reports under: unified memory when the row says so, else by CUDA total."""
    if point.get("unified"):
        return "unified"
    total = point["total_gib"]
    # 94-96 GB cards (RTX PRO 6000 Blackwell 94.97-95.01 GiB, H100 NVL) report apart from the 80 GB class
    for bound, name in ((26, "24 GB"), (36, "32 GB"), (50, "40-48 GB"), (90, "80 GB"), (100, "94-96 GB")):
        if total < bound:
            return name
    return "141 GB+"


def class_summary(label, by_class):
    """One line per card class: rows, median |error|, worst optimistic, optimistic rows, within 1 GiB."""
    for name, errs in sorted(by_class.items()):
        print(f"[{label}] {name:<9} {len(errs):>3} rows · median |error| {statistics.median(abs(e) for e in errs):.2f} GiB · worst {max(errs, key=abs):+.2f} · "
              f"worst optimistic {max(errs):+.2f} · optimistic {sum(1 for e in errs if e > 0)} · within 1 GiB {sum(1 for e in errs if abs(e) <= 1.0)}/{len(errs)}")


def full_errors(points, label):
    """Print the available-KV table of one split; return (errors, errors with logged weights)."""
    print(f"\n[{label}] available KV memory per rank (GiB): predicted vs logged; error = predicted − logged (+ = optimistic)")
    print(f"{'point':<30}{'gpu':<16}{'tp':>3}{'logged':>9}{'pred':>9}{'err':>8}{'pred|W':>9}{'err|W':>8}  weights pred/logged  act pred/logged  non-torch pred/logged  verdict")
    errors, errors_w, by_class, unpriced = [], [], {}, []
    for p in points:
        if p["kind"] != "full":
            continue
        spec = spec_of(p)
        totals = [p["total_gib"]] * (p.get("tp", 1) * p.get("pp", 1))
        report = fit_config(spec, totals, knobs(p, spec), gpu_name=p.get("nvml_name"), sm=p.get("sm"))
        logged = p["logged"]["available_kv_gib"]
        pred = report.available_kv_gib
        err = pred - logged
        errors.append(err)
        # `unknown`, or a refusal in a setup c3 says it cannot price (the refusal stands: the gap only lowers the pool)
        why = next((t for t in [*report.reasons, *report.notes] if "cannot price this setup" in t), None)
        if report.verdict == "unknown" or why:
            unpriced.append((p["id"], err, report.verdict, why or (report.reasons[0] if report.reasons else "")))
        by_class.setdefault(card_class(p), []).append(err)
        line = f"{p['id'][:29]:<30}{p['gpu'][:15]:<16}{p.get('tp', 1):>3}{logged:>9.2f}{pred:>9.2f}{err:>+8.2f}"
        w_logged = p["logged"].get("weights_gib")
        if w_logged is not None:
            with_w = fit_config(spec, totals, knobs(p, spec, weights_gib=w_logged), gpu_name=p.get("nvml_name"), sm=p.get("sm"))
            err_w = with_w.available_kv_gib - logged
            errors_w.append(err_w)
            line += f"{with_w.available_kv_gib:>9.2f}{err_w:>+8.2f}"
        else:
            line += f"{'':>9}{'':>8}"
        g = report.gpus[0]
        line += f"  {g.weights_gib:.2f}/{w_logged if w_logged is not None else '-'}"
        line += f"  {g.activation_gib:.2f}/{p['logged'].get('activation_gib', '-')}  {g.non_torch_gib:.2f}/{p['logged'].get('non_torch_gib', '-')}  {report.verdict}"
        print(line)
    if errors:
        optimistic = sum(1 for e in errors if e > 0)
        print(
            f"[{label}] {len(errors)} rows · median |error| {statistics.median(abs(e) for e in errors):.2f} GiB · worst |error| "
            f"{max(abs(e) for e in errors):.2f} GiB · worst optimistic {max(errors):+.2f} GiB · optimistic rows {optimistic} "
            f"(> +0.5 GiB: {sum(1 for e in errors if e > 0.5)}) · within 1 GiB: {sum(1 for e in errors if abs(e) <= 1.0)}/{len(errors)}"
        )
    if unpriced:
        # A row in a setup c3 declares unpriced carries no KV claim: its figures are printed (and counted above),
        # and the rows c3 does price are summarised apart.
        claimed = [e for e, p in zip(errors, [q for q in points if q["kind"] == "full"], strict=True) if p["id"] not in {u[0] for u in unpriced}]
        print(
            f"[{label}] rows c3 prices (not an unpriced setup): {len(claimed)} · median |error| {statistics.median(abs(e) for e in claimed):.2f} GiB · "
            f"worst optimistic {max(claimed):+.2f} GiB · optimistic rows {sum(1 for e in claimed if e > 0)} (> +0.5 GiB: "
            f"{sum(1 for e in claimed if e > 0.5)}) · within 1 GiB: {sum(1 for e in claimed if abs(e) <= 1.0)}/{len(claimed)}"
        )
        for point_id, err, verdict, why in unpriced:
            print(f"[{label}] unpriced setup ({verdict}): {point_id} {err:+.2f} GiB — {why[:100]}")
    if by_class:
        class_summary(label, by_class)
    if errors_w:
        print(f"[{label}] with logged weights: median |error| {statistics.median(abs(e) for e in errors_w):.2f} GiB · worst optimistic {max(errors_w):+.2f} GiB")
    return errors, errors_w


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, default=ROOT / "bench" / "data" / "bootlogs-calibration.yaml")
    parser.add_argument("--validation", type=Path, default=ROOT / "bench" / "data" / "bootlogs-validation.yaml")
    args = parser.parse_args()
    calibration = yaml.safe_load(args.calibration.read_text())["points"]
    validation = yaml.safe_load(args.validation.read_text())["points"]

    full_errors(calibration, "calibration")
    full_errors(validation, "validation")
    points = calibration + validation

    print("\nKV arithmetic from the logged budget (bytes/token per rank; tokens = the log's definition: old num_blocks//groups × block, new ⌊conc × L⌋)")
    print(f"{'point':<30}{'bytes/tok':>10}{'tokens pred':>13}{'logged':>10}{'conc pred':>11}{'logged':>8}{'need GiB':>10}{'logged':>8}{'block':>7}{'logged':>7}")
    for p in points:
        if p["kind"] not in ("full", "kv") or p.get("engine", "vllm") != "vllm":
            continue
        spec = spec_of(p)
        bpt, tokens, conc, tokens_logged, conc_logged, need, need_logged, block, block_logged = kv_check(p, spec)
        def fmt(v, width, spec=","):
            return f"{'-':>{width}}" if v is None else f"{v:>{width}{spec}}"
        print(f"{p['id'][:29]:<30}{bpt:>10,}{fmt(tokens, 13)}{fmt(tokens_logged, 10)}{fmt(conc, 11, '.2f')}{fmt(conc_logged, 8, '.2f')}"
              f"{fmt(need, 10, '.3f')}{fmt(need_logged, 8, '.2f')}{block:>7}{fmt(block_logged, 7, '')}")

    print("\nWeights per rank (GiB): predicted vs `Model loading took`")
    for p in points:
        if p["kind"] != "weights" and "weights_gib" not in p["logged"]:
            continue
        spec = spec_of(p)
        v = variant(spec, p.get("weights"))
        if v is None:
            continue  # no weights row: the available-KV table shows the config-shape estimate
        pred = rank_weights_gib(spec, v.bytes, tp=p.get("tp", 1), pp=p.get("pp", 1), quantized=v.name not in ("bf16", "fp16"))[0]
        logged = p["logged"]["weights_gib"]
        print(f"{p['id'][:29]:<30}tp {p.get('tp', 1):<3}{pred:>9.3f}{logged:>10.4f}{pred - logged:>+9.3f}")
    print("\nSources: every point cites its issue/PR/page in", ", ".join(str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f) for f in (args.calibration, args.validation)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
