"""Browser-test fixtures: Debian's Chromium driven by Playwright (no browser download), screenshots kept."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="package")
def browser() -> Iterator:
    """One Chromium for the browser tests; it closes (and its event loop ends) when they are done."""
    if not CHROMIUM.exists():
        message = "/usr/bin/chromium is missing (apt-get install chromium); `./run tests` installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # under CI a browser test that would skip fails instead
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread while it is open; the ORM calls the tests
    # make are still synchronous. Allowed for these tests only, and undone with the browser.
    with pytest.MonkeyPatch.context() as mp, sync_playwright() as pw:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser, live_server) -> Iterator:
    """A page of a fresh context. Every browser test also checks the Content-Security-Policy: a violation Chromium
    reports on any page the test visits (an inline script or style, eval) fails the test."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    pg = context.new_page()
    violations: list[str] = []
    pg.on(
        "console",
        lambda msg: violations.append(f"{pg.url}: {msg.text}") if "Content Security Policy" in msg.text else None,
    )
    try:
        yield pg
    finally:
        context.close()
    assert violations == [], "CSP violations:\n" + "\n".join(violations)


@pytest.fixture
def screenshot():
    """screenshot(page, "name") saves test-artifacts/screenshots/name.png (full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(pg, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        pg.screenshot(path=str(path), full_page=True)
        return path

    return take


def login(pg, username: str, password: str) -> None:
    """Log in through the login form with the keyboard."""
    pg.goto("/accounts/login/")
    pg.fill("input[name=username]", username)
    pg.fill("input[name=password]", password)
    pg.press("input[name=password]", "Enter")
    pg.wait_for_url(lambda url: "/accounts/login/" not in url)


def broken_links(pg, pages: list[str]) -> dict[str, int]:
    """Open each of `pages` and follow every same-site link on it (GET, with the page's session): the links that
    answer 400 or more, with their status. External links (a crawled page's own URL) and the logout form are not
    followed."""
    from urllib.parse import urldefrag, urlsplit

    origin = urlsplit(pg.url)[:2]
    links: set[str] = set()
    for url in dict.fromkeys(pages):
        pg.goto(url)
        for href in pg.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            target = urldefrag(href).url
            if urlsplit(target)[:2] == origin:
                links.add(target)
    broken = {}
    for target in sorted(links):
        status = pg.request.get(target, max_redirects=5).status
        if status >= 400:
            broken[target] = status
    return broken
