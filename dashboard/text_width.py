"""How wide a text is drawn, estimated generously, so that layouts computed before the browser
draws anything (the heatmap's margins, the dependency graph's label boxes, a table's column
widths) leave every label room enough."""

from __future__ import annotations

#: character widths in ems, the wider of Arial/Liberation Sans and DejaVu Sans (what
#: "sans-serif" is on most machines) rounded up; any other character counts as ``_WIDE``
_EMS = {
    **dict.fromkeys("MWmw", 1.0),
    **dict.fromkeys("ijlI.,:;'|!", 0.34),
    **dict.fromkeys("ftr()[] ", 0.44),
    **dict.fromkeys("-", 0.42),
    **dict.fromkeys("_", 0.58),
    **dict.fromkeys("abcdeghknopqsuvxyz0123456789", 0.64),
    **dict.fromkeys("ABCDEFGHJKLNOPQRSTUVXYZ", 0.8),
}
_WIDE = 0.9


def text_px(text: str, font_px: float) -> float:
    """A generous estimate of how wide ``text`` is drawn in a sans-serif font of
    ``font_px`` pixels: layouts reserve this much room (the browser's own measure, checked
    in the browser tests, stays under it)."""
    return font_px * sum(_EMS.get(ch, _WIDE) for ch in text)
