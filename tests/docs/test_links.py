"""The documentation's links between its own pages lead somewhere: every relative link in the
README, docs/ and packaging/README.md names a file that exists and, with a `#fragment`, a heading
of that file (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PAGES = sorted(
    [
        REPO_ROOT / "README.md",
        REPO_ROOT / "packaging" / "README.md",
        *(REPO_ROOT / "docs").glob("*.md"),
    ]
)
# [text](target) outside code; images too. External links (a scheme) are not followed.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _anchor(heading: str) -> str:
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_anchor(h) for h in HEADING.findall(text)}


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_the_pages_are_found() -> None:
    names = {page.name for page in PAGES}
    assert {"README.md", "control_plane.md", "configuration.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_link_leads_to_a_page_and_heading(page: Path) -> None:
    broken = []
    for target in _links(page):
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target}: no heading #{fragment}")
    assert not broken, f"{page.relative_to(REPO_ROOT)}: " + "; ".join(broken)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """The check itself: a page linking to a missing file and a missing heading."""
    (tmp_path / "a.md").write_text("# Title\n\n[b](b.md) [t](#nothing) [ok](#title)\n")
    targets = _links(tmp_path / "a.md")
    assert targets == ["b.md", "#nothing", "#title"]
    assert _anchors(tmp_path / "a.md") == {"title"}
    assert not (tmp_path / "b.md").exists()
