"""Styled 404 and 500 pages (the site's layout, not Django's bare ones) and a favicon."""

import pytest
from django.test import RequestFactory
from django.views.defaults import server_error


@pytest.mark.django_db
def test_an_unknown_page_is_a_styled_404(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Page not found</h1>" in html and "/no-such-page/" in html
    assert "leaderboard/board.css" in html and 'class="site"' in html  # base.html's layout
    assert "Resolver404" not in html


@pytest.mark.django_db
def test_a_404_says_what_was_not_found(client, registry):
    response = client.get("/category/no-such-category/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Page not found</h1>" in html and "no-such-category" in html


def test_the_500_page_is_styled_and_needs_no_database():
    # no django_db mark: any database access here fails the test
    response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    html = response.content.decode()
    assert "Something went wrong on our side" in html
    assert "leaderboard/board.css" in html and 'href="/"' in html


@pytest.mark.django_db
def test_the_favicon_is_linked_and_favicon_ico_is_not_a_404(client):
    html = client.get("/no-such-page/").content.decode()
    assert '<link rel="icon" href="/static/leaderboard/favicon.svg" type="image/svg+xml">' in html
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/leaderboard/favicon.svg"
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content if icon.streaming else [icon.content])
