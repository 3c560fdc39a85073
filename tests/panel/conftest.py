"""Fixtures for the panel's tests: a served control plane on a fake clock near the spring night,
an organisation with an agent, a signed-in browser (Debian's chromium driven by Playwright).

The clock shows 2027-03-26 11:00 UTC and runs at real speed, so the preview's seven nights include
28 March 2027, when Amsterdam's clocks skip from 02:00 to 03:00.

The browser is never skipped: without `/usr/bin/chromium` (or `$NACHTWACHT_CHROMIUM`) the browser
tests fail and say to run `bin/install-browser`. A failing browser test leaves a screenshot of its
page in `$NACHTWACHT_SCREENSHOT_DIR` (default: `<tmp>/nachtwacht-panel-screenshots`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import RunningControlPlane

SPRING_CLOCK_START = "2027-03-26T11:00:00Z"
CHROMIUM = Path(os.environ.get("NACHTWACHT_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(
    os.environ.get(
        "NACHTWACHT_SCREENSHOT_DIR",
        str(Path(tempfile.gettempdir()) / "nachtwacht-panel-screenshots"),
    )
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@dataclass(frozen=True)
class PanelWorld:
    server: RunningControlPlane
    org_id: str
    panel_key: str
    agent_id: str
    agent_key: str

    @property
    def url(self) -> str:
        return self.server.base_url + "/panel/"

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.server.base_url, timeout=30, **kwargs)


def spring_clock() -> str:
    return f"{SPRING_CLOCK_START},anchor={time.time()},speed=1"


@pytest.fixture
def panel_world(control_plane_server: Callable[..., RunningControlPlane]) -> PanelWorld:
    server = control_plane_server(fake_clock=spring_clock())
    org = server.create_org("Acme")
    agent = server.enroll_agent(org["org_id"], "web-01")
    return PanelWorld(
        server=server,
        org_id=org["org_id"],
        panel_key=org["panel_key"],
        agent_id=agent["agent_id"],
        agent_key=agent["agent_key"],
    )


@pytest.fixture
def loopback_world(control_plane_server: Callable[..., RunningControlPlane]) -> PanelWorld:
    """A world whose operator allowed webhooks to 127.0.0.0/8 (the receiver runs here)."""
    server = control_plane_server(
        fake_clock=spring_clock(), args=["--webhook-allow-network", "127.0.0.0/8"]
    )
    org = server.create_org("Acme")
    agent = server.enroll_agent(org["org_id"], "web-01")
    return PanelWorld(
        server=server,
        org_id=org["org_id"],
        panel_key=org["panel_key"],
        agent_id=agent["agent_id"],
        agent_key=agent["agent_key"],
    )


@contextlib.contextmanager
def sign_in_client(world: PanelWorld, key: str, **kwargs: Any) -> Iterator[httpx.Client]:
    """An HTTP client signed in with `key` (the sign-in form's cookie and token included)."""
    with world.client(**kwargs) as client:
        form = client.get("/panel/sign-in")
        answer = client.post("/panel/sign-in", data={"key": key, "csrf": csrf_of(form.text)})
        assert answer.status_code == 303, answer.text
        yield client


def csrf_of(html: str) -> str:
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


AXE = Path(
    os.environ.get(
        "NACHTWACHT_AXE",
        str(
            Path(__file__).resolve().parents[2]
            / ".venv/panel-browser/node_modules/axe-core/axe.min.js"
        ),
    )
)
DOC_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "panel"


def check_accessibility(page: Any) -> None:
    """axe-core on the page as it is: no serious or critical violation."""
    if not AXE.exists():
        pytest.fail(f"axe-core is missing at {AXE}: run bin/install-browser", pytrace=False)
    page.wait_for_load_state()
    if page.evaluate("typeof axe === 'undefined'"):  # a page opened without `new_page`
        page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    serious = [
        (v["id"], v["impact"], [node["target"] for node in v["nodes"]][:3])
        for v in result["violations"]
        if v["impact"] in {"serious", "critical"}
    ]
    assert serious == [], f"{page.url}: {serious}"


def doc_screenshot(page: Any, name: str) -> None:
    """With NACHTWACHT_DOC_SCREENSHOTS=1, keep this screen as docs/panel/<name>.png."""
    if os.environ.get("NACHTWACHT_DOC_SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOC_SCREENSHOTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium under Playwright's sync API, for one test module: that API keeps an event loop
    running in the main thread for as long as it is open, and every later test of the worker that
    called `asyncio.run()` failed ("cannot be called from a running event loop") once the browser
    tests no longer came last in it (`tests/conftest.py::_dealt`)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"the panel's browser tests need chromium at {CHROMIUM}: run bin/install-browser "
            "(Debian's chromium package; Playwright cannot download its own browser here)",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        page = getattr(item, "panel_page", None)
        if page is not None:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.nodeid)
            try:
                page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
            except Exception as exc:
                report.sections.append(("screenshot", f"could not take one: {exc}"))
            else:
                report.sections.append(("screenshot", str(SCREENSHOTS / f"{name}.png")))


@pytest.fixture
def new_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Opens a page in a fresh browser context (its own cookies) with the given languages, in a
    window of the given size (a desktop's unless told).

    Every request that leaves loopback is refused and, at the end, fails the test: the panel
    must work on a control plane without internet access."""
    contexts: list[Any] = []
    outside: list[str] = []

    def only_loopback(route: Any) -> None:
        host = urlsplit(route.request.url).hostname
        if host in {"127.0.0.1", "localhost"}:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    def open_page(locale: str = "en-GB", *, width: int = 1200, height: int = 900) -> Any:
        # bypass_csp: axe-core is injected as a script the panel's own policy would refuse.
        context = browser.new_context(
            locale=locale, viewport={"width": width, "height": height}, bypass_csp=True
        )
        contexts.append(context)
        # axe-core in every document of the context, compiled once per renderer: injecting it
        # for each check sent its 600 KB through the driver and compiled it again, ~0.15 s a
        # check (nearly half the checks' time). `check_accessibility` still fails without it.
        if AXE.exists():
            context.add_init_script(path=str(AXE))
        context.route("**/*", only_loopback)
        page = context.new_page()
        page.set_default_timeout(15_000)
        request.node.panel_page = page
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert outside == [], f"the page asked for something outside: {outside}"
