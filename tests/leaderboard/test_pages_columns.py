"""Every board column explained where it is shown (header tooltip, methodology page), and a column
that cannot separate the entries (all equal) muted with a note saying whether it counts."""

import html as htmllib
import re

import pytest
from django.urls import reverse

from evaluator.data.registry.weights import COMPONENTS
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


def headers_block(page: str, key: str) -> str:
    """The whole header cell of column ``key``: its opening tag and what it holds."""
    thead = page[page.index("<thead>") : page.index("</thead>")]
    start = thead.index(f'data-col="{key}"')
    return thead[start : thead.index("</th>", start)]


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
    # no probe here has a recipe: ρ_CE is the spec's default for all three, measured on none, and
    # the note says so (not that the entries are equal)
    rho = re.search(r'<p class="legend flat-column" data-col="rho_ce">(.*?)</p>', page, re.S).group(1)
    assert "not measured on any of the 3 entries: each shows the imputed 0.500" in rho
    assert "entries equal" not in rho and 'flat-note">not measured<' in headers_block(page, "rho_ce")
    assert "imputed" not in legend
    # recall is 0.2 for every task of every probe here: not part of the score
    recall = re.search(r'<p class="legend flat-column" data-col="recall">(.*?)</p>', page, re.S)
    assert recall is None or "not part of the ProbeScore" in recall.group(1)


def test_a_column_still_pending_for_every_entry_says_pending_not_all_equal(client, board):
    from leaderboard.models import EvaluationRun, ProbeVersion

    # the robustness runs of two of the three entries are queued: their Goodhart resistance is
    # imputed for every entry until they finish
    for slug, status in (("strong", "queued"), ("middle", "running"), ("weak", "succeeded")):
        version = ProbeVersion.objects.get(probe__slug=slug)
        EvaluationRun.objects.create(
            probe_version=version,
            kind="robustness",
            task=version.scores.first().probe_version.probe.category.tasks.first(),
            split="test",
            base_model_id=version.probe.base_model_id,
            status=status,
        )
    page = get(client, reverse("leaderboard:category", args=["hallucination"]))
    legend = re.search(r'<p class="legend flat-column" data-col="goodhart">(.*?)</p>', page, re.S).group(1)
    assert "pending: measured on none of the 3 entries yet (2 with its runs queued or running)" in legend
    assert "entries equal" not in legend
    assert 'flat-note">pending<' in headers_block(page, "goodhart")
    assert "pending" in title_of(header_cells(page)["goodhart"])
    # a column measured on every entry is still called equal when it is
    assert "all 3 entries equal (1.000)" in headers_block(page, "latency")


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
    # ... within the scored components: every one of them still comes before what is not scored
    # (AUROC-EA, n/a on this board and so with no spread, included)
    assert order.index("auroc_ea") < order.index("lift") and order.index("auroc_ea") < order.index("recall")
    assert max(order.index(c) for c in COMPONENTS) < min(
        order.index(k) for k in ("recall", "lift", "utility")
    )


@pytest.mark.parametrize("spec", ["v0.0.1", "v0.0.3"])
def test_the_scored_components_come_first_heaviest_first_then_what_is_not_scored(client, board, spec):
    from leaderboard.models import WeightsSpec

    weights = WeightsSpec.objects.get(version=spec).weights
    page = get(client, reverse("leaderboard:category", args=["hallucination"]), spec=spec)
    order = list(header_cells(page))[1:]  # after the rank
    assert order[0] == "score"
    scored = sorted((c for c in COMPONENTS if weights.get(c)), key=lambda c: -weights[c])  # ties: table order
    assert order[1 : 1 + len(scored)] == scored
    assert order.index("auroc_ea") < order.index("recall")
    # a component the spec does not weigh (v0.0.1 predates the Goodhart resistance) is shown after them
    for c in COMPONENTS:
        if not weights.get(c):
            assert order.index(c) > len(scored), c


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
