"""Render a fit report: the verdict and each rank's memory plan, in a few aligned lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from backend.errors import terminal_safe

if TYPE_CHECKING:
    from backend.models import FitReport

VERDICT_GLYPH = {
    "fits": ("✓", "$success"),
    "tight": ("◐", "$warning"),
    "wont-fit": ("✗", "$error"),
    "incompatible-hw": ("✗", "$error"),
    "unknown": ("?", "$text-muted"),
}


def verdict_markup(verdict: str) -> str:
    """`✓ fits` / `◐ tight` / `✗ wont-fit` … as markup (glyph + word, never colour alone)."""
    glyph, style = VERDICT_GLYPH.get(verdict, ("?", "$text-muted"))
    return f"[{style}]{glyph} {verdict}[/]"


def fit_lines(report: FitReport | None) -> Content:
    """The whole breakdown (or a placeholder when no report yet)."""
    if report is None:
        return Content.from_markup("[$text-muted]fit: choose a slug and GPUs[/]")
    summary = [f"[b]fit[/] {verdict_markup(report.verdict)}"]
    if report.available_kv_gib is not None:
        summary.append(f"KV pool {report.available_kv_gib:.2f} GiB/rank")
    if report.kv_cache_tokens is not None:
        conc = f" (×{report.max_concurrency:.1f} at {report.max_model_len:,})" if report.max_concurrency is not None and report.max_model_len else ""
        summary.append(f"{report.kv_cache_tokens:,} KV tokens{conc}")
    if report.max_model_len_fits is not None:
        summary.append(f"context ≤ {report.max_model_len_fits:,}")
    lines = [Content.from_markup(" · ".join(summary))]
    # A record or a reason may quote a slug or a file: substituted (markup in it means only itself), one line.
    if report.learned is not None:
        lines.append(Content.from_markup("[$accent]● measured on this rig: $s[/]", s=terminal_safe(report.learned.summary, one_line=True)))
        if report.learned.flagged and report.learned.off_by_gib is not None:
            lines.append(Content.from_markup(f"[$warning]⚠ the last boot's KV memory landed {report.learned.off_by_gib:+.2f} GiB from c3's prediction[/]"))
    if report.gpus:
        lines.append(Content.from_markup("[$text-muted]GiB    total weights   other     KV[/]"))
        for gpu in report.gpus:
            other = gpu.activation_gib + gpu.cudagraph_gib + gpu.non_torch_gib
            label = f"GPU{gpu.index}" if gpu.index is not None else "rank"
            lines.append(Content(f"{label:<5} {gpu.total_gib:6.1f} {gpu.weights_gib:7.1f} {other:7.1f} {gpu.available_kv_gib:6.1f}"))
    lines += [Content.from_markup("[$warning]• $r[/]", r=terminal_safe(reason, one_line=True)) for reason in report.reasons]
    return Content("\n").join(lines)
