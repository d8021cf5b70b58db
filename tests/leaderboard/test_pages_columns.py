"""Every board column explained where it is shown (header tooltip, methodology page), and a column
that cannot separate the entries (all equal) muted with a note saying whether it counts."""

import html as htmllib
import re

import pytest
from django.urls import reverse

from leaderboard.presentation import column_help, column_tooltip
from tests.leaderboard.board_data import MODEL_B, ensure_models, ensure_tasks, public_probe


@pytest.fixture
def board(registry):
    """Three hallucination probes: every latency under 1 ms (each normalised to 1.000), AUROCs apart."""
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    public_probe(slug="strong", name="Strong Probe", auroc=0.93, latency_ms=0.02, tasks=tasks)
    public_probe(slug="middle", name="Middle Probe", auroc=0.85, latency_ms=0.05, tasks=tasks, license="MIT")
    public_probe(slug="weak", name="Weak Probe", auroc=0.70, latency_ms=0.4, tasks=tasks, base_model=MODEL_B)


def get(client, url, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def header_cells(page: str) -> dict[str, str]:
    """data-col → the opening tag of each column header of the board table."""
    thead = page[page.index("<thead>") : page.index("</thead>")]
    return {m.group(1): m.group(0) for m in re.finditer(r'<th [^>]*data-col="([^"]+)"[^>]*>', thead)}


def title_of(tag: str) -> str:
    return htmllib.unescape(re.search(r'title="([^"]*)"', tag).group(1))


@pytest.mark.parametrize("params", [{}, {"measured_only": "1"}])
def test_every_board_column_has_a_tooltip_and_its_explanation_on_the_methodology_page(client, board, params):
    page = get(client, reverse("leaderboard:category", args=["hallucination"]), **params)
    headers = header_cells(page)
    assert {"rank", "auroc", "auroc_ea", "auroc_ds", "calibration", "rho_ce", "latency", "license"} <= set(
        headers
    )
    assert {"recall", "lift", "utility"} <= set(headers)
    assert ("measured" if params else "score") in headers
    methodology = htmllib.unescape(get(client, reverse("leaderboard:methodology")))
    for key, tag in headers.items():
        help = column_help(key)
        # the header's tooltip is the column's explanation: what, unit, range, interval
        assert title_of(tag).startswith(column_tooltip(key)), key
        for field in ("what", "unit", "range", "interval", "zero", "top", "score"):
            assert help[field] and help[field] in methodology, (key, field)
        assert f'id="col-{key}"' in methodology
    assert "within 0.0005 of the others" in methodology
    assert "#columns" in page  # the board links its column explanations


def test_the_confusing_columns_say_what_they_are(client, registry):
    methodology = htmllib.unescape(get(client, reverse("leaderboard:methodology")))
    columns = methodology[methodology.index('id="columns"') :]
    # latency: the normalisation, and what 1.000 for every probe means
    latency = columns[columns.index('id="col-latency"') :]
    latency = latency[: latency.index("</tr>")]
    assert "1 − log10(ms)/4" in latency and "every such probe shows 1.000" in latency
    assert "changes no rank" in latency
    # direction utility: a z-score against random directions, and no interval stored
    utility = columns[columns.index('id="col-utility"') :]
    utility = utility[: utility.index("</tr>")]
    assert "z-score" in utility and "random directions" in utility and "no interval is stored" in utility
    # lift over text: over the strongest text model, its interval, and why some tasks show none
    lift = columns[columns.index('id="col-lift"') :]
    lift = lift[: lift.index("</tr>")]
    assert "strongest text-only baseline" in lift and "DeLong" in lift and "≈0" in lift
    assert "the text alone reaches AUROC 1.000 no probe can show any lift" in lift
    # the board's other orders
    for key, words in (
        ("borda", "share of the other entries"),
        ("delta", "holdout AUROC minus"),
        ("controlled", "with and without the probe's score"),
    ):
        row = columns[columns.index(f'id="col-{key}"') :]
        assert words in row[: row.index("</tr>")]


def test_a_column_where_every_entry_is_equal_is_muted_and_says_whether_it_counts(client, board):
    page = get(client, reverse("leaderboard:category", args=["hallucination"]))
    headers = header_cells(page)
    # latency: 0.02, 0.05 and 0.4 ms all normalise to 1.000 (1 ms or faster)
    assert "flat" in headers["latency"] and "flat" not in headers["auroc"]
    note = "all 3 entries equal (1.000): this column does not separate them"
    assert note in title_of(headers["latency"])
    legend = re.search(r'<p class="legend flat-column" data-col="latency">(.*?)</p>', page, re.S).group(1)
    # weights spec v0.0.2 (the board's default) gives latency 0.05
    assert note in legend and "counts in the ProbeScore (weight 0.05), adding the same 0.050" in legend
    # its cells are muted; the AUROC cells are not
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    assert body.count('<td class="flat num"') >= 3
    # no probe here has a recipe: ρ_CE is the spec's default for all three, and the note says so
    rho = re.search(r'<p class="legend flat-column" data-col="rho_ce">(.*?)</p>', page, re.S).group(1)
    assert "all 3 entries equal (0.500; imputed for every entry)" in rho
    assert "imputed" not in legend
    # recall is 0.2 for every task of every probe here: not part of the score
    recall = re.search(r'<p class="legend flat-column" data-col="recall">(.*?)</p>', page, re.S)
    assert recall is None or "not part of the ProbeScore" in recall.group(1)


def test_lift_over_text_all_zero_on_an_eval_awareness_board_is_called_out(client, registry):
    ensure_models()
    tasks = ensure_tasks("eval_awareness", 1)
    for slug, auroc, latency in (("ea-one", 1.0, 0.1), ("ea-two", 0.99, 3.0)):
        public_probe(
            slug=slug,
            category="eval_awareness",
            auroc=auroc,
            latency_ms=latency,
            tasks=tasks,
            # the board's lift column is the in-domain mean (here the one task it was trained on)
            extra_measurements={"lift_over_text": 0.0, "lift_over_text_in_domain": 0.0},
        )
    page = get(client, reverse("leaderboard:category", args=["eval_awareness"]))
    headers = header_cells(page)
    assert "flat" in headers["lift"] and "flat" not in headers["latency"]  # 3 ms is below 1.000
    assert "flat" not in headers["auroc_ea"]  # n/a on this board, not a value
    legend = re.search(r'<p class="legend flat-column" data-col="lift">(.*?)</p>', page, re.S).group(1)
    assert "all 2 entries equal (0.000)" in legend and "it is not part of the ProbeScore" in legend
    assert "the eval-awareness tasks' test rows are separable from their words" in title_of(headers["lift"])
    # both entries are at the AUROC ceiling: the board says so and leads with what separates them
    assert 'id="saturation"' in page and "2 of 2 entries score at least 0.99" in page
    order = [m.group(1) for m in re.finditer(r'data-col="([a-z_]+)"', page[: page.index("</thead>")])]
    assert order.index("latency") < order.index("auroc")  # latency spreads (0.1 vs 3 ms), AUROC barely


def test_a_single_entry_is_not_called_flat(client, registry):
    ensure_models()
    tasks = ensure_tasks("deception", 1)
    public_probe(slug="alone", category="deception", latency_ms=0.01, tasks=tasks)
    page = get(client, reverse("leaderboard:category", args=["deception"]))
    assert "flat-column" not in page and "all equal" not in page


def test_each_metric_column_and_the_api_say_its_definition_version(client, registry):
    from evaluator.metrics import metric_table

    for m in metric_table.metrics():
        for key in (m.component, m.column.key if m.column else ""):
            if key:
                assert f"Definition version {m.version}." in column_tooltip(key), key
    assert "Definition version 2." in column_tooltip("lift")  # the lift over the panel is version 2
    versions = client.get("/api/v1/leaderboard").json()["metric_versions"]
    assert versions == {m.name: m.version for m in metric_table.metrics()} and versions["lift_over_text"] == 2
