"""Every chart's legend lies inside its figure (it was cut off at the right edge)."""

import xml.etree.ElementTree as ET

import pytest

from leaderboard.web import plots

SVG = "{http://www.w3.org/2000/svg}"
LONG = "a probe with a long descriptive name on halueval-qa-v1 (test split, contrast pair)"


def legend_boxes(
    svg: str,
) -> tuple[tuple[float, float, float, float], list[tuple[float, float, float, float]]]:
    """The viewBox and, per legend text, its box (x0, y0, x1, y1) from an upper estimate of its width."""
    root = ET.fromstring(str(svg))
    x, y, w, h = (float(v) for v in root.get("viewBox").split())
    boxes = []
    for text in root.iter(f"{SVG}text"):
        if text.get("class") != "legend":
            continue
        tx, ty, label = float(text.get("x")), float(text.get("y")), "".join(text.itertext())
        boxes.append((tx, ty - plots.LEGEND_FONT_PX, tx + plots.text_width(label), ty + 3))
    return (x, y, x + w, y + h), boxes


CHARTS = {
    "roc": lambda: plots.roc_svg({LONG: [[0, 0], [0.2, 0.7], [1, 1]], "short-v1": [[0, 0], [1, 1]]}),
    "reliability": lambda: plots.reliability_svg(
        {LONG: [{"lo": 0.5, "hi": 0.6, "n": 10, "mean_prob": 0.55, "positive_rate": 0.5}]}
    ),
    "history": lambda: plots.history_svg(
        [
            {
                "quarter": "2026Q1",
                "holdout_auroc": 0.8,
                "test_auroc": 0.82,
                "reference_auroc": 0.81,
                "outcome": "held",
            }
        ]
    ),
    "steer": lambda: plots.steer_svg(
        [("halueval-qa-v1", 0.4, [0.0, 0.1, -0.1])], title="Addition", x_label="readout change"
    ),
}


@pytest.mark.parametrize("name", CHARTS)
def test_the_legend_is_inside_the_figure(name):
    (vx0, vy0, vx1, vy1), boxes = legend_boxes(CHARTS[name]())
    assert boxes, "the chart has a legend"
    for x0, y0, x1, y1 in boxes:
        assert vx0 <= x0 and x1 <= vx1 and vy0 <= y0 and y1 <= vy1, (
            name,
            (x0, y0, x1, y1),
            (vx0, vy0, vx1, vy1),
        )


def test_a_label_too_long_for_the_figure_is_cut_and_kept_whole_in_its_title():
    root = ET.fromstring(str(CHARTS["roc"]()))
    legend = root.find(f".//{SVG}g[@class='chart-legend']")
    entries = legend.findall(f"{SVG}g")
    assert entries[0].find(f"{SVG}title").text == LONG
    shown = entries[0].find(f"{SVG}text").text
    assert shown.endswith("…") and LONG.startswith(shown[:-1])
    assert entries[1].find(f"{SVG}text").text == "short-v1"  # short labels are shown whole
