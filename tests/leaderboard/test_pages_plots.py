"""The server-side SVG charts: well-formed, labelled, accessible, and escaping what they print."""

import xml.etree.ElementTree as ET

from leaderboard.web import plots

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(str(svg))


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_roc_chart_has_axes_ticks_legend_and_a_title():
    svg = plots.roc_svg(
        {"task-a-v1": [[0, 0], [0.1, 0.6], [1, 1]], "task-b-v1": [[0, 0], [0.5, 0.5], [1, 1]]}
    )
    root = parse(svg)
    assert root.get("role") == "img" and root.get("aria-labelledby")
    assert root.find(f"{SVG}title").text == "ROC curves (test split)"
    labels = texts(root)
    assert "False-positive rate" in labels and "True-positive rate" in labels
    assert "task-a-v1" in labels and "task-b-v1" in labels and "chance" in labels
    assert {"0", "0.2", "0.4", "0.6", "0.8", "1"} <= set(labels)
    assert len(list(root.iter(f"{SVG}polyline"))) == 2


def test_reliability_diagram_skips_empty_bins_and_explains_each_point():
    bins = [
        {"bin": 0, "lo": 0.0, "hi": 0.1, "n": 0, "mean_prob": None, "positive_rate": None},
        {"bin": 5, "lo": 0.5, "hi": 0.6, "n": 40, "mean_prob": 0.55, "positive_rate": 0.6},
    ]
    root = parse(plots.reliability_svg({"task-a-v1": bins}))
    circles = list(root.iter(f"{SVG}circle"))
    assert len(circles) == 1
    assert "n = 40" in circles[0].find(f"{SVG}title").text
    assert "Mean predicted probability" in texts(root) and "perfect calibration" in texts(root)


def test_history_chart_puts_quarters_on_the_x_axis():
    points = [
        {
            "quarter": "2026Q1",
            "holdout_auroc": 0.8,
            "test_auroc": 0.82,
            "reference_auroc": 0.82,
            "outcome": "held",
        },
        {
            "quarter": "2026Q2",
            "holdout_auroc": 0.7,
            "test_auroc": 0.81,
            "reference_auroc": 0.82,
            "outcome": "dropped",
        },
    ]
    root = parse(plots.history_svg(points))
    labels = texts(root)
    assert "2026Q1" in labels and "2026Q2" in labels and "Quarter" in labels and "AUROC" in labels
    assert any("dropped" in (c.find(f"{SVG}title").text or "") for c in root.iter(f"{SVG}circle"))


def test_a_single_quarter_still_renders():
    root = parse(
        plots.history_svg(
            [
                {
                    "quarter": "2026Q1",
                    "holdout_auroc": 0.9,
                    "test_auroc": None,
                    "reference_auroc": 0.9,
                    "outcome": "held",
                }
            ]
        )
    )
    assert len(list(root.iter(f"{SVG}circle"))) == 2


def test_labels_are_escaped():
    root = parse(plots.roc_svg({"<script>&": [[0, 0], [1, 1]]}))
    assert "<script>&" in texts(root)  # parsed back from &lt;script&gt;&amp;
    assert "<script>" not in str(plots.roc_svg({"<script>&": [[0, 0], [1, 1]]}))


def test_two_charts_on_one_page_get_distinct_ids():
    a = parse(plots.roc_svg({"a": [[0, 0], [1, 1]]}))
    b = parse(plots.reliability_svg({"a": []}))
    assert a.get("aria-labelledby") != b.get("aria-labelledby")


def test_long_curves_are_thinned():
    pts = [[i / 5000, (i / 5000) ** 0.5] for i in range(5001)]
    root = parse(plots.roc_svg({"t": pts}))
    polyline = next(root.iter(f"{SVG}polyline"))
    assert len(polyline.get("points").split()) <= 400
