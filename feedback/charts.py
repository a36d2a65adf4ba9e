"""Reliability diagram as server-side SVG (built on mining.charts' axes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString

from mining.charts import HEIGHT, PAD_B, PAD_L, PAD_R, PAD_T, WIDTH, axes, svg_document

COLOURS = ("#2553c9", "#137a3a", "#b3261e", "#8a5a00")


def reliability_svg(series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> SafeString:
    """Mean confidence (x) against observed GOOD frequency (y) per bin for each method; the diagonal is perfect."""
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    parts = axes(0.0, 1.0, 1.0, "mean confidence", "observed GOOD rate")
    parts.append(
        f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{PAD_L + plot_w}" y2="{PAD_T}" stroke="#aaa" '
        'stroke-dasharray="3 3"/>'
    )
    for k, (name, (conf, freq)) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        pts = " ".join(
            f"{PAD_L + c * plot_w:.1f},{PAD_T + plot_h - f * plot_h:.1f}" for c, f in zip(conf, freq, strict=True)
        )
        parts.append(f'<polyline class="reliability" points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.append(
            f'<text x="{PAD_L + 8}" y="{PAD_T + 14 + 14 * k}" font-size="11" fill="{colour}">{escape(name)}</text>'
        )
    return svg_document(parts, "Reliability diagram")
