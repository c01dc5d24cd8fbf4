"""The docs site stays true: the options page is what scripts/gen_docs.py renders from the option
specs, and every relative link of the README leads to a page that exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_options_page_is_what_the_generator_renders() -> None:
    rendered = load_generator().render()
    committed = (DOCS / "options.md").read_text(encoding="utf-8")
    assert committed == rendered, "docs/options.md is stale: run python scripts/gen_docs.py"


def test_options_page_names_every_option() -> None:
    generator = load_generator()  # the one place the option specs are imported from
    page = (DOCS / "options.md").read_text(encoding="utf-8")
    for option in (*generator.FLAGS, *generator.SPECS):
        assert f"`{option.flag}" in page


def test_check_mode_exits_1_on_a_stale_page(tmp_path: Path) -> None:
    generator = load_generator()
    page = tmp_path / "options.md"
    assert generator.main(["--out", str(page), "--check"]) == 1  # missing
    assert generator.main(["--out", str(page)]) == 0
    assert generator.main(["--out", str(page), "--check"]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("| `0.05` |", "| `0.5` |"))
    assert generator.main(["--out", str(page), "--check"]) == 1


def test_render_is_deterministic() -> None:
    generator = load_generator()
    assert generator.render() == generator.render()


# [text](target): a target without a scheme or a leading "#" is relative.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    return [
        target
        for target in LINK.findall(markdown)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def test_readme_relative_links_point_to_existing_pages() -> None:
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert any(link.startswith("docs/") for link in links), "the README links no docs page"
    missing = [link for link in links if not (ROOT / link.split("#", 1)[0]).is_file()]
    assert missing == []


def test_readme_docs_links_name_existing_anchors() -> None:
    """A link to docs/page.md#anchor names a heading of that page (as MkDocs makes its id)."""
    broken = []
    for link in relative_links((ROOT / "README.md").read_text(encoding="utf-8")):
        path, _, anchor = link.partition("#")
        if not anchor or not path.startswith("docs/"):
            continue
        headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(encoding="utf-8"), re.M)
        if anchor not in {slug(heading) for heading in headings}:
            broken.append(link)
    assert broken == []


def slug(heading: str) -> str:
    """Python-Markdown's default heading id (toc's slugify): lower case, words joined by -."""
    text = re.sub(r"[`*_]", "", heading)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_readme_options_exist() -> None:
    """The README's short options table names only options the plugin has."""
    generator = load_generator()
    known = {option.flag for option in (*generator.FLAGS, *generator.SPECS)}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `(--mxperf[a-z-]*)", readme, re.M))
    assert len(named) >= 10
    assert named <= known


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        (
            "[a](docs/x.md) [b](https://e.org) [c](#here) [d](examples/y.yml#L1)",
            ["docs/x.md", "examples/y.yml#L1"],
        ),
        ("<https://ui.perfetto.dev> [e](mailto:a@b.c)", []),
    ],
)
def test_relative_links_are_found(markdown: str, expected: list[str]) -> None:
    assert relative_links(markdown) == expected
