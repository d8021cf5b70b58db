"""The methodology page renders docs/METHODOLOGY.md (the prose, in the repository) above the numbers
in force, with any raw HTML in the markdown escaped."""

import html as htmllib
import re

from django.urls import reverse

from leaderboard.presentation import METHODOLOGY_PATH, markdown_html, methodology_html


def test_the_methodology_page_renders_the_repository_s_methodology(client, registry):
    text = METHODOLOGY_PATH.read_text(encoding="utf-8")
    response = client.get(reverse("leaderboard:methodology"))
    assert response.status_code == 200
    page = htmllib.unescape(response.content.decode())
    # a heading of the document, as a heading with its id
    assert "## The ProbeScore" in text
    assert '<h2 id="m-the-probescore">The ProbeScore</h2>' in page
    # a distinctive sentence of the document (its first line of prose under "The ProbeScore")
    sentence = "The ProbeScore is a weighted sum of eight components, each in [0, 1]:"
    assert sentence in text and sentence in page
    # a table of the markdown is a table on the page
    assert "<th>metric</th>" in page
    # the numbers in force are still there, after the prose
    assert page.index('id="m-the-metrics"') < page.index('id="h-formula"') < page.index('id="columns"')
    # the document's own title is left out (the page has its own h1)
    assert page.count("<h1") == 1


def test_every_heading_of_the_document_is_on_the_page(client, registry):
    text = METHODOLOGY_PATH.read_text(encoding="utf-8")
    headings = re.findall(r"^#{2,4} (.+)$", text, flags=re.MULTILINE)
    assert len(headings) >= 8
    page = htmllib.unescape(client.get(reverse("leaderboard:methodology")).content.decode())
    missing = [h for h in headings if f">{h.replace('*', '')}</h" not in page]
    assert not missing


def test_raw_html_in_the_markdown_is_escaped():
    out = markdown_html(
        "# Title\n\nText <script>alert(1)</script> and <b>bold</b>.\n\n<div onclick='x()'>block</div>\n\n"
        "[link](javascript:alert(1))\n",
        drop_title=True,
    )
    assert "<script>" not in out and "<b>" not in out and "<div" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&lt;div onclick" in out
    assert 'href="javascript:' not in out
    assert "Title" not in out  # drop_title


def test_the_document_renders_without_raw_html():
    """The committed document itself holds no raw HTML: everything on the page comes from markdown."""
    rendered = str(methodology_html())
    assert "&lt;" not in rendered.replace("&lt;=", "")


def test_the_methodology_page_has_a_table_of_contents_of_its_headings(client, registry):
    page = client.get(reverse("leaderboard:methodology")).content.decode()
    assert page.count('id="contents"') == 1 and "<!--contents-->" not in page
    nav = page[page.index('id="contents"') : page.index("</nav>", page.index('id="contents"'))]
    links = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', nav)
    # every h2 and h3 of the document, in page order; then the numbers in force, each of its
    # sections listed under it
    headings = re.findall(r'<h([23])\b[^>]*\bid="([^"]+)"[^>]*>', page)
    in_force = [a for _, a in headings].index("h-in-force")
    expected = [a for _, a in headings[:in_force]] + [a for level, a in headings[in_force:] if level == "2"]
    assert [anchor for anchor, _ in links] == expected
    under = nav[nav.index('href="#h-in-force"') :]
    assert under.index("<ol>") < under.index('href="#h-formula"') < under.index('href="#protocol"')
    assert len(links) >= 20
    anchors = dict(links)
    assert anchors["m-the-probescore"] == "The ProbeScore"
    assert anchors["m-domains"] == "Domains"  # a sub-heading, listed under its section
    assert "h-in-force" in anchors and "columns" in anchors and "uncertainty" in anchors
    assert (
        nav.index('href="#m-what-is-measured-on"')
        < nav.index('href="#m-domains"')
        < nav.index('href="#m-the-measurement-protocol"')
    )
    # the contents come before the text they list
    assert page.index('id="contents"') < page.index('id="m-the-probescore"')


def test_no_weights_spec_note_points_at_an_unpublished_draft(client, registry):
    from leaderboard.models import WeightsSpec
    from leaderboard.presentation import spec_description_shown

    stored = WeightsSpec.objects.get(version="v0.0.1").description
    assert "draft" in stored  # the registry file keeps its text (it is hashed and published as it is)
    page = htmllib.unescape(client.get(reverse("leaderboard:methodology")).content.decode())
    assert "8-axis" not in page and "leftover" not in page and "draft)" not in page
    shown = spec_description_shown(stored)
    assert shown in page and shown.startswith("The v0.0.1 methodology.")
    assert "distribution-shift AUROC 15%; this spec follows the text." in shown
