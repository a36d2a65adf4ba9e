"""Server-side SVG charts (no JavaScript): a score histogram and a threshold yield curve.

Inputs are small aggregates (tens of bins), never rows. Every text in the SVG is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 220
PAD_L, PAD_R, PAD_T, PAD_B = 56, 12, 14, 34


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def count_axis_max(n: int) -> int:
    """The top of a count axis for largest value `n`: four equal whole-number steps of a round size (1, 2, 5 x 10^k),
    so that no tick shows a fraction of a pair."""
    n = max(int(n), 1)
    magnitude = 1
    while True:
        for step in (1, 2, 5):
            if 4 * step * magnitude >= n:
                return 4 * step * magnitude
        magnitude *= 10


def _tick(value: float, integer: bool) -> str:
    return str(round(value)) if integer else _fmt(value)


def axes(
    x_lo: float, x_hi: float, y_hi: float, x_label: str, y_label: str, *, integer_y: bool = False, y_lo: float = 0.0
) -> list[str]:
    """The two axes with five ticks each and their labels; `integer_y` prints whole-number y ticks (give a y_hi
    from count_axis_max so that they are exact); the y axis starts at `y_lo` (0 unless given)."""
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    parts = [
        f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{PAD_L + plot_w}" y2="{PAD_T + plot_h}" stroke="#444"/>',
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{PAD_T + plot_h}" stroke="#444"/>',
    ]
    for i in range(5):
        fx = i / 4
        x = PAD_L + fx * plot_w
        parts.append(
            f'<text x="{x:.1f}" y="{PAD_T + plot_h + 14}" font-size="10" text-anchor="middle">'
            f"{escape(_fmt(x_lo + fx * (x_hi - x_lo)))}</text>"
        )
        y = PAD_T + plot_h - fx * plot_h
        parts.append(
            f'<text x="{PAD_L - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
            f"{escape(_tick(y_lo + fx * (y_hi - y_lo), integer_y))}</text>"
        )
    parts.append(
        f'<text x="{PAD_L + plot_w / 2:.1f}" y="{HEIGHT - 4}" font-size="11" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    parts.append(
        f'<text x="12" y="{PAD_T + plot_h / 2:.1f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {PAD_T + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    return parts


def svg_document(parts: list[str], title: str) -> SafeString:
    body = "".join(parts)
    return mark_safe(  # noqa: S308 - every interpolated text above is escaped or a number
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
    )


def _threshold_line(threshold: float | None, x_lo: float, x_hi: float) -> list[str]:
    if threshold is None or x_hi <= x_lo or not (x_lo <= threshold <= x_hi):
        return []
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    x = PAD_L + (threshold - x_lo) / (x_hi - x_lo) * plot_w
    return [
        f'<line class="threshold" x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{PAD_T + plot_h}" '
        f'stroke="#b3261e" stroke-dasharray="4 3"/>',
        f'<text x="{x + 3:.1f}" y="{PAD_T + 10}" font-size="10" fill="#b3261e">{escape(_fmt(threshold))}</text>',
    ]


def histogram_svg(
    edges: Sequence[float],
    counts: Sequence[int],
    kept_counts: Sequence[int] | None = None,
    *,
    threshold: float | None = None,
    title: str = "Score histogram",
) -> SafeString:
    """Bars per bin (len(edges) == len(counts) + 1); `kept_counts` drawn darker over the totals."""
    if not counts:
        return svg_document(
            [f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">No candidates</text>'], title
        )
    if len(edges) != len(counts) + 1:
        raise ValueError(f"histogram needs len(edges) == len(counts) + 1 (got {len(edges)} edges, {len(counts)} bins)")
    x_lo, x_hi = float(edges[0]), float(edges[-1])
    y_hi = count_axis_max(max(counts))
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    bar_w = plot_w / len(counts)
    parts = axes(x_lo, x_hi, y_hi, "score", "pairs", integer_y=True)
    for i, n in enumerate(counts):
        x = PAD_L + i * bar_w
        for value, fill, cls in (
            (n, "#c9d4f2", "bar-all"),
            ((kept_counts or [None] * len(counts))[i], "#2553c9", "bar-kept"),
        ):
            if not value:
                continue
            h = value / y_hi * plot_h
            parts.append(
                f'<rect class="{cls}" x="{x + 0.5:.1f}" y="{PAD_T + plot_h - h:.1f}" '
                f'width="{max(bar_w - 1, 0.5):.1f}" height="{h:.1f}" fill="{fill}">'
                f"<title>{escape(_fmt(edges[i]))}–{escape(_fmt(edges[i + 1]))}: {int(value)}</title></rect>"
            )
    parts += _threshold_line(threshold, x_lo, x_hi)
    return svg_document(parts, title)


def yield_svg(
    points: Sequence[tuple[float, int]], *, threshold: float | None = None, title: str = "Pairs kept at each threshold"
) -> SafeString:
    """A step line of (threshold, pairs kept) points, thresholds ascending."""
    if not points:
        return svg_document(
            [f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">No candidates</text>'], title
        )
    xs = [float(p[0]) for p in points]
    ys = [int(p[1]) for p in points]
    x_lo, x_hi = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1.0
    y_hi = count_axis_max(max(ys))
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    coords = [
        (PAD_L + (x - x_lo) / (x_hi - x_lo) * plot_w, PAD_T + plot_h - y / y_hi * plot_h)
        for x, y in zip(xs, ys, strict=True)
    ]
    path = " ".join(f"{'M' if i == 0 else 'L'}{cx:.1f},{cy:.1f}" for i, (cx, cy) in enumerate(coords))
    parts = axes(x_lo, x_hi, y_hi, "threshold (score ≥)", "pairs kept", integer_y=True)
    parts.append(f'<path class="yield" d="{path}" fill="none" stroke="#137a3a" stroke-width="2"/>')
    for (cx, cy), x, y in zip(coords, xs, ys, strict=True):
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2" fill="#137a3a"><title>≥ {escape(_fmt(x))}: {y}</title></circle>'
        )
    parts += _threshold_line(threshold, x_lo, x_hi)
    return svg_document(parts, title)
