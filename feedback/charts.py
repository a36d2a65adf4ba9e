"""Reliability diagram as server-side SVG (built on mining.charts' axes)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString

from mining.charts import HEIGHT, PAD_B, PAD_L, PAD_R, PAD_T, WIDTH, axes, svg_document

COLOURS = ("#2553c9", "#137a3a", "#b3261e", "#8a5a00")


def reliability_svg(series: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[int]]]) -> SafeString:
    """One marker per bin for each method: mean confidence (x) against observed GOOD rate (y), its area growing with
    the bin's label count (written beside it), over the dashed diagonal of perfect calibration. Axes span [0, 1]
    whatever the data, so a model squeezed into a narrow band is seen as such."""
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    parts = axes(0.0, 1.0, 1.0, "mean predicted P(good) in the bin", "observed GOOD rate")
    parts.append(
        f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{PAD_L + plot_w}" y2="{PAD_T}" stroke="#aaa" '
        'stroke-dasharray="3 3"/>'
    )
    largest = max((max(c, default=0) for _, _, c in series.values()), default=0) or 1
    for k, (name, (conf, freq, count)) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        points = [
            (PAD_L + c * plot_w, PAD_T + plot_h - f * plot_h, c, f, int(n))
            for c, f, n in zip(conf, freq, count, strict=True)
        ]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, *_ in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1" stroke-opacity="0.5"/>'
            )
        for x, y, c, f, n in points:
            r = 2.5 + 5.5 * math.sqrt(n / largest)
            parts.append(
                f'<circle class="reliability-bin" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}" '
                f'fill-opacity="0.6" stroke="{colour}"><title>{escape(name)}: {n} labels, mean P(good) {c:.3f}, '
                f"GOOD rate {f:.3f}</title></circle>"
            )
            parts.append(f'<text x="{x + r + 2:.1f}" y="{y + 3:.1f}" font-size="9" fill="{colour}">{n}</text>')
        parts.append(
            f'<text x="{PAD_L + 8}" y="{PAD_T + 14 + 14 * k}" font-size="11" fill="{colour}">● {escape(name)}</text>'
        )
    return svg_document(parts, "Reliability diagram (markers: bins, with their label counts)")
