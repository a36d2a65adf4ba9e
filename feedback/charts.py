"""Reliability diagram as server-side SVG (built on mining.charts' axes)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString

from mining.charts import HEIGHT, PAD_B, PAD_L, PAD_R, PAD_T, WIDTH, axes, svg_document

COLOURS = ("#2553c9", "#137a3a", "#b3261e", "#8a5a00")


def axis_start(values: Sequence[float]) -> float:
    """Where both axes of the reliability diagram start: 0, or when every bin lies high (a model whose confidences and
    GOOD rates are all above 0.5, the usual case for mined pairs), the tenth below the lowest value less 0.05, so the
    bins spread over the plot instead of piling up in its top-right corner."""
    low = min(values, default=0.0)
    if low <= 0.5:
        return 0.0
    return max(0.0, math.floor((low - 0.05) * 10) / 10)


def reliability_svg(series: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[int]]]) -> SafeString:
    """One marker per bin for each method: mean confidence (x) against observed GOOD rate (y), its area growing with
    the bin's label count (written beside it where it does not cover another count), over the dashed diagonal of
    perfect calibration. Both axes span [lo, 1] with the same lo (axis_start), so the diagonal stays the diagonal and a
    model squeezed into a narrow band is still seen as such."""
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    lo = axis_start([v for conf, freq, _ in series.values() for v in (*conf, *freq)])
    span = 1.0 - lo
    x_label = "mean predicted P(good) in the bin" + (f" (axes from {lo:.1f})" if lo else "")
    parts = axes(lo, 1.0, 1.0, x_label, "observed GOOD rate", y_lo=lo)
    parts.append(
        f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{PAD_L + plot_w}" y2="{PAD_T}" stroke="#aaa" '
        'stroke-dasharray="3 3"/>'
    )
    largest = max((max(c, default=0) for _, _, c in series.values()), default=0) or 1
    labelled: list[tuple[float, float]] = []  # where count labels are, so that none is written over another
    for k, (name, (conf, freq, count)) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        points = [
            (PAD_L + (c - lo) / span * plot_w, PAD_T + plot_h - (f - lo) / span * plot_h, c, f, int(n))
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
            tx, ty = x + r + 2, y + 3
            if all(abs(tx - ox) > 18 or abs(ty - oy) > 10 for ox, oy in labelled):
                labelled.append((tx, ty))
                parts.append(f'<text x="{tx:.1f}" y="{ty:.1f}" font-size="9" fill="{colour}">{n}</text>')
        # the legend in the lower right, below the diagonal, where a calibrated model's bins are not
        parts.append(
            f'<text x="{PAD_L + plot_w - 8}" y="{PAD_T + plot_h - 10 - 14 * (len(series) - 1 - k)}" font-size="11" '
            f'text-anchor="end" fill="{colour}">● {escape(name)}</text>'
        )
    return svg_document(parts, "Reliability diagram (markers: bins, with their label counts)")
