"""The leaderboard pages: overview, category boards, sorting, filters, spec switch, badges."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluator.data.registry.weights import COMPONENTS
from leaderboard import models as m
from tests.factories import (
    CycleResultFactory,
    LeakageRecordFactory,
    ProbeVersionFactory,
    ReevaluationCycleFactory,
    SubmissionFactory,
)
from tests.leaderboard.board_data import (
    MODEL_B,
    add_spec,
    board_owner,
    ensure_models,
    ensure_tasks,
    public_probe,
    score_for,
)


@pytest.fixture
def board(registry):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    return {
        "tasks": tasks,
        "strong": public_probe(
            slug="strong",
            name="Strong Probe",
            auroc=0.93,
            auroc_ea=0.9,
            auroc_ds=0.85,
            rho_ce=0.7,
            tasks=tasks,
            authors=["Ada Lovelace"],
        ),
        "middle": public_probe(slug="middle", name="Middle Probe", auroc=0.85, tasks=tasks, license="MIT"),
        "weak": public_probe(
            slug="weak",
            name="Weak Probe",
            auroc=0.70,
            latency_ms=1.0,
            tasks=tasks,
            base_model=MODEL_B,
            authors=["Grace Hopper"],
        ),
    }


def page(client, slug="hallucination", **params):
    response = client.get(reverse("leaderboard:category", args=[slug]), params)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def order(html: str, *names: str) -> list[str]:
    """The given probe names in the order they appear in the board table."""
    table = html[html.index('<table class="board') :]
    return sorted(names, key=lambda n: table.index(n) if n in table else 10**9)


def test_the_overview_shows_top_entries_and_open_slots(client, board):
    response = client.get(reverse("leaderboard:index"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Strong Probe" in html
    # the seven other categories have no probe: open slots with a link to the submit form
    assert html.count("Open slot — be the first") == 7
    assert 'href="/submit/"' in html
    for category in m.Category.objects.all():
        assert category.name in html


def test_an_empty_category_is_an_open_slot(client, board):
    html = page(client, "sandbagging")
    assert "Open slot — be the first" in html
    assert 'href="/submit/"' in html
    assert '<table class="board' not in html


def test_every_page_renders_with_no_probe_at_all(client, registry):
    for category in m.Category.objects.all():
        assert "be the first" in page(client, category.slug)
    assert client.get(reverse("leaderboard:index")).status_code == 200


def test_the_default_order_is_the_norm_2_ranking(client, board):
    html = page(client)
    assert order(html, "Weak Probe", "Middle Probe", "Strong Probe") == [
        "Strong Probe",
        "Middle Probe",
        "Weak Probe",
    ]


def test_license_never_decides_the_ranking_on_its_own(client, registry):
    """Norm 2: a closed probe with a higher AUROC ranks above an open one with a lower AUROC, all
    else equal, even though the open probe's total (which includes the license) is higher."""
    ensure_models()
    open_ = public_probe(slug="open-probe", name="Open Probe", auroc=0.800, license="Apache-2.0")
    closed = public_probe(slug="closed-probe", name="Closed Probe", auroc=0.802, license="closed")
    assert open_.scores.get(spec="v0.0.2").total > closed.scores.get(spec="v0.0.2").total
    html = page(client, "hallucination")
    assert order(html, "Open Probe", "Closed Probe") == ["Closed Probe", "Open Probe"]


def test_rejected_failed_and_unfinished_submissions_never_appear(client, board):
    for status in ("rejected", "failed", "queued", "running"):
        public_probe(slug=f"hidden-{status}", name=f"Hidden {status}", auroc=0.99, status=status)
    html = page(client)
    assert "Hidden" not in html
    assert "Hidden" not in client.get(reverse("leaderboard:index")).content.decode()


def test_the_latest_scored_version_is_the_one_shown(client, board):
    probe = board["weak"].probe
    public_probe(slug="weak", probe=probe, number=2, auroc=0.99, tasks=board["tasks"])
    public_probe(slug="weak", probe=probe, number=3, auroc=0.5, status="running")
    html = page(client)
    row = re.search(r"Weak Probe</a>\s*<div class=\"meta\">v(\d+)", html)
    assert row and row.group(1) == "2"
    assert "0.990" in html  # v2's AUROC


def test_sorting_by_a_component_changes_the_order(client, board):
    # weak has the fastest probe: best on latency, worst overall
    html = page(client, sort="latency")
    assert order(html, "Weak Probe", "Middle Probe", "Strong Probe")[0] == "Weak Probe"
    html = page(client, sort="latency", dir="asc")
    assert order(html, "Weak Probe", "Middle Probe", "Strong Probe")[-1] == "Weak Probe"
    assert 'aria-sort="ascending"' in html


def test_every_component_is_a_sortable_column(client, board):
    html = page(client)
    for name in ("auroc", "auroc_ea", "auroc_ds", "calibration", "rho_ce", "latency", "license"):
        assert f'data-sort="{name}"' in html
        assert page(client, sort=name)


def test_sorting_by_name(client, board):
    html = page(client, sort="name")
    assert order(html, "Weak Probe", "Middle Probe", "Strong Probe") == [
        "Middle Probe",
        "Strong Probe",
        "Weak Probe",
    ]


def test_filter_by_base_model_license_and_status(client, board):
    html = page(client, model=MODEL_B)
    assert "Weak Probe" in html and "Strong Probe" not in html
    html = page(client, license="MIT")
    assert "Middle Probe" in html and "Strong Probe" not in html and "Weak Probe" not in html
    probe = board["middle"].probe
    probe.status, probe.deprecated_reason = "deprecated", "holdout AUROC dropped 12 points in 2026Q1"
    probe.save()
    html = page(client, status="deprecated")
    assert "Middle Probe" in html and "Strong Probe" not in html
    html = page(client, status="active")
    assert "Middle Probe" not in html and "Strong Probe" in html


def test_search_by_name_and_author(client, board):
    html = page(client, q="strong")
    assert "Strong Probe" in html and "Weak Probe" not in html
    html = page(client, q="hopper")
    assert "Weak Probe" in html and "Strong Probe" not in html
    # the search finds, it does not re-rank: Weak keeps its rank 3
    assert re.search(r'<td class="num rank">3', html)


def test_measured_only_ranks_by_measured_components(client, registry):
    ensure_models()
    # imputed components: a high imputed auroc_ea / auroc_ds helps the total but not the measured view
    # A: strong AUROC, poor measured calibration/latency/license, generous imputed components
    a = public_probe(
        slug="measured-a", name="Probe A", auroc=0.95, ece=0.5, latency_ms=10_000, license="closed"
    )
    # B: everything measured, middling
    b = public_probe(
        slug="measured-b",
        name="Probe B",
        auroc=0.6,
        auroc_ea=0.55,
        auroc_ds=0.55,
        rho_ce=0.5,
        ece=0.1,
        latency_ms=100,
    )
    sa, sb = a.scores.get(spec="v0.0.2"), b.scores.get(spec="v0.0.2")
    assert sa.total > sb.total and sa.measured_total < sb.measured_total
    html = page(client)
    assert order(html, "Probe A", "Probe B") == ["Probe A", "Probe B"]
    html = page(client, measured_only="1")
    assert order(html, "Probe A", "Probe B") == ["Probe B", "Probe A"]
    assert "excluded" in html  # A's imputed components are shown without a contribution
    # sorting by the measured-only score from the normal view gives the same order
    assert order(page(client, sort="measured"), "Probe A", "Probe B") == ["Probe B", "Probe A"]
    assert order(page(client, sort="measured", dir="asc"), "Probe A", "Probe B") == ["Probe A", "Probe B"]


def test_imputed_values_are_marked_with_their_note(client, board):
    html = page(client)
    assert 'class="imp-mark" title="imputed: imputed 0.85× raw AUROC"' in html
    assert "default 0.5 (no re-fit possible)" in html


def test_auroc_ea_is_not_applicable_for_eval_awareness_probes(client, registry):
    ensure_models()
    public_probe(slug="ea-probe", name="EA Probe", category="eval_awareness")
    html = page(client, "eval_awareness")
    assert "n/a" in html
    assert "EA Probe" in html


def test_the_interval_on_auroc_is_shown(client, board):
    html = page(client)
    assert re.search(r'class="ci"[^>]*>\[0\.90, 0\.96\]', html)


def test_badges(client, board):
    strong, middle, weak = board["strong"], board["middle"], board["weak"]
    strong.reproduced = True
    strong.declared_gaps = {"auroc": {"declared": 0.99, "measured": 0.93, "gap": 0.06}}
    strong.save()
    strong.probe.stability_quarters = 3
    strong.probe.save()
    middle.probe.status = "deprecated"
    middle.probe.deprecated_reason = "holdout AUROC dropped 11 points in 2026Q2"
    middle.probe.save()
    LeakageRecordFactory(probe=weak.probe, status="confirmed", public_note="trained on test")
    LeakageRecordFactory(probe=strong.probe, status="open")  # open records are not public
    html = page(client)
    assert "reproduced" in html
    assert "stable 3Q" in html
    assert "declared≠measured" in html
    assert 'class="deprecated' in html and "holdout AUROC dropped 11 points in 2026Q2" in html
    assert html.count(">leakage detected<") == 1
    # deprecated entries are unranked and listed after the active ones
    assert order(html, "Middle Probe", "Weak Probe", "Strong Probe") == [
        "Strong Probe",
        "Weak Probe",
        "Middle Probe",
    ]


def test_stability_badge_needs_two_quarters(client, board):
    board["strong"].probe.stability_quarters = 1
    board["strong"].probe.save()
    assert "stable 1Q" not in page(client)


def test_the_spec_switch_changes_totals_per_the_weights_spec(client, board):
    spec2 = add_spec(
        "v0.0.9",
        auroc=0.10,
        auroc_ea=0.10,
        auroc_ds=0.10,
        calibration=0.10,
        rho_ce=0.10,
        latency=0.30,
        license=0.20,
    )
    for key in ("strong", "middle", "weak"):
        v = board[key]
        base = v.scores.get(spec="v0.0.1").measurements
        score_for(
            v,
            spec="v0.0.9",
            auroc=base["auroc"],
            latency_ms=base["latency_ms"],
            auroc_ea=base.get("auroc_ea"),
            auroc_ds=base.get("auroc_ds"),
            rho_ce=base.get("rho_ce"),
        )
    weak = board["weak"].scores.get(spec=spec2)
    expected = sum(spec2.weights[name] * c["value"] for name, c in weak.components.items())
    assert weak.total == pytest.approx(expected)
    html_v1 = page(client, spec="v0.0.1")
    html_v2 = page(client, spec="v0.0.9")
    assert f"{board['weak'].scores.get(spec='v0.0.1').total:.3f}" in html_v1
    assert f"{weak.total:.3f}" in html_v2
    # the weights shown in the column headers come from the spec row
    assert "w 0.30" in html_v2 and "w 0.20" in html_v2
    # latency-heavy v0.0.9 puts the fastest probe first
    assert order(html_v2, "Weak Probe", "Strong Probe")[0] == "Weak Probe"
    assert order(html_v1, "Weak Probe", "Strong Probe")[0] == "Strong Probe"


def test_compare_shows_the_rank_change(client, board):
    add_spec(
        "v0.0.9",
        auroc=0.10,
        auroc_ea=0.10,
        auroc_ds=0.10,
        calibration=0.10,
        rho_ce=0.10,
        latency=0.30,
        license=0.20,
    )
    for key in ("strong", "middle", "weak"):
        v = board[key]
        base = v.scores.get(spec="v0.0.2").measurements
        score_for(
            v,
            spec="v0.0.9",
            auroc=base["auroc"],
            latency_ms=base["latency_ms"],
            auroc_ea=base.get("auroc_ea"),
            auroc_ds=base.get("auroc_ds"),
            rho_ce=base.get("rho_ce"),
        )
    html = page(client, spec="v0.0.9", compare="v0.0.1")
    assert "rank change against v0.0.1" in html
    # weak: 3rd under v0.0.1, 1st under v0.0.9
    assert re.search(r'title="rank 3 under v0.0.1[^"]*">\+2<', html)


def test_unknown_spec_or_parameters_are_a_400_and_unknown_category_a_404(client, board):
    response = client.get(reverse("leaderboard:category", args=["hallucination"]), {"spec": "v9.9.9"})
    assert response.status_code == 400
    assert "accepted: v0.0.1" in response.content.decode()
    assert (
        client.get(reverse("leaderboard:category", args=["hallucination"]), {"sort": "bogus"}).status_code
        == 400
    )
    assert client.get(reverse("leaderboard:category", args=["nope"])).status_code == 404


def test_no_weight_is_written_in_the_board_templates():
    from pathlib import Path

    import leaderboard

    root = Path(leaderboard.__file__).parent / "templates" / "leaderboard"
    for name in ("_board_table.html", "category.html", "index.html", "methodology.html", "probe.html"):
        text = (root / name).read_text()
        assert not re.search(r"\b0\.\d+\b", text), name


def test_public_pages_are_cacheable_with_an_etag(client, board):
    url = reverse("leaderboard:category", args=["hallucination"])
    response = client.get(url)
    assert "public" in response["Cache-Control"] and "max-age=" in response["Cache-Control"]
    etag = response["ETag"]
    again = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304


def _board_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_board_runs_a_constant_number_of_queries(client, registry, django_assert_max_num_queries):
    ensure_models()
    tasks = ensure_tasks("hallucination", 2)
    url = reverse("leaderboard:category", args=["hallucination"]) + "?compare=v0.0.1"

    cycle = ReevaluationCycleFactory(quarter="2026Q1", triggered_by=board_owner())

    def add(n, start):
        for i in range(start, start + n):
            v = public_probe(slug=f"bulk-{i}", auroc=0.6 + i / 500, tasks=tasks, reproduced=True)
            if i % 7 == 0:
                LeakageRecordFactory(probe=v.probe, status="confirmed")
            if i % 5 == 0:
                CycleResultFactory(probe_version=v, cycle=cycle)

    add(5, 0)
    few = _board_queries(client, url)
    add(45, 5)
    many = _board_queries(client, url)
    assert few == many
    with django_assert_max_num_queries(few):
        client.get(url)
    with django_assert_max_num_queries(few):
        client.get(reverse("leaderboard:index"))


def test_pagination_keeps_the_filters(client, registry, settings):
    from leaderboard.web import views

    ensure_models()
    original = views.BOARD_PAGE_SIZE
    views.BOARD_PAGE_SIZE = 2
    try:
        for i in range(5):
            public_probe(slug=f"paged-{i}", name=f"Paged {i}", auroc=0.6 + i / 100)
        html = page(client, sort="name")
        assert "page 1 of 3" in html
        assert "sort=name&amp;page=2" in html
        html = page(client, sort="name", page="3")
        assert "Paged 4" in html and "Paged 0" not in html
    finally:
        views.BOARD_PAGE_SIZE = original


def test_a_version_without_a_submission_row_is_not_public(client, board):
    v = ProbeVersionFactory(probe=board["strong"].probe, number=9)
    score_for(v, auroc=0.99)
    html = page(client)
    assert re.search(r"Strong Probe</a>\s*<div class=\"meta\">v1", html)
    SubmissionFactory(probe_version=v, status="scored")
    assert re.search(r"Strong Probe</a>\s*<div class=\"meta\">v9", page(client))


@pytest.mark.parametrize("values", [False, True])
def test_the_ranking_numbers_come_from_the_stored_components(board, values):
    """The board reads only a few numbers of each Score's components for ranking; they must be the
    stored ones (both the light path and the one with every component value)."""
    from leaderboard.selectors.board.get import board_get
    from leaderboard.selectors.board.query import BoardQuery

    result = board_get(query=BoardQuery(category="hallucination"), values=values)
    for row in result.rows:
        stored = m.Score.objects.get(pk=row.score_id).components
        assert row.license_contribution == pytest.approx(stored["license"]["contribution"])
        if values:
            assert row.values == tuple(stored[c]["value"] for c in COMPONENTS)
            assert row.imputed == tuple(stored[c]["imputed"] for c in COMPONENTS)


def test_a_rows_badges_are_written_once_for_every_page(client, board):
    """The board, the task page and the base model page render a row's badges with one tag: the
    same markup, its text escaped."""
    strong = board["strong"]
    strong.reproduced = True
    strong.save()
    strong.probe.stability_quarters = 2
    strong.probe.status = "deprecated"
    strong.probe.deprecated_reason = 'dropped <b>"11"</b> & more'
    strong.probe.save()
    badges = re.compile(r'<a href="/probes/strong/">Strong Probe</a>.*?(<ul class="badges">.*?</ul>)', re.S)
    found = [
        badges.search(client.get(url).content.decode()).group(1)
        for url in (
            reverse("leaderboard:category", args=["hallucination"]),
            reverse("leaderboard:task", args=[board["tasks"][0].slug]),
            reverse("leaderboard:model", args=[strong.probe.base_model_id]),
        )
    ]
    assert found[0] == found[1] == found[2]
    assert 'title="Held in 2 consecutive quarterly re-evaluations">stable 2Q</li>' in found[0]
    assert 'title="dropped &lt;b&gt;&quot;11&quot;&lt;/b&gt; &amp; more">deprecated</li>' in found[0]
    assert ">reproduced</li>" in found[0]
