"""README numbers are generated from results/ (traintime.core.readme)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from traintime.core.errors import SchemaError
from traintime.core.io import to_markdown
from traintime.core.readme import BLOCKS, blocks_of, fill, render_blocks

REPO = Path(__file__).resolve().parents[1]


def _results(tmp_path: Path) -> Path:
    t = tmp_path / "results" / "tables"
    t.mkdir(parents=True)
    pd.DataFrame({"paper": ["chronos"], "reproduced": [3], "inconclusive": [2]}).to_csv(t / "one.csv", index=False)
    return tmp_path / "results"


def test_fill_replaces_every_block_with_the_generated_one(tmp_path):
    results = _results(tmp_path)
    blocks = {"one": ("tables/one.csv", lambda p: to_markdown(pd.read_csv(p)))}
    rendered = render_blocks(results, blocks)
    readme = "intro\n<!-- BEGIN results:one -->\n| typed | by hand |\n<!-- END results:one -->\noutro\n"
    out = fill(readme, rendered)
    table = to_markdown(pd.read_csv(results / "tables" / "one.csv"))
    assert out == f"intro\n<!-- BEGIN results:one -->\n{table.rstrip()}\n<!-- END results:one -->\noutro\n"
    assert "chronos" in table and blocks_of(out) == blocks_of(rendered)


def test_a_block_without_generated_content_or_table_is_an_error(tmp_path):
    with pytest.raises(SchemaError, match="without generated content"):
        fill("<!-- BEGIN results:ghost -->\nx\n<!-- END results:ghost -->\n", "")
    with pytest.raises(SchemaError, match="does not exist"):
        render_blocks(tmp_path, {"one": ("tables/missing.csv", str)})


def test_readme_has_every_generated_block():
    assert set(blocks_of((REPO / "README.md").read_text())) == set(BLOCKS)


def test_readme_numbers_agree_with_results():
    """Whenever a run's results are present, the README's blocks must be the ones it generated
    (`make readme`); a number typed by hand or left from another run fails here."""
    rendered = REPO / "results" / "readme_blocks.md"
    if not rendered.is_file():
        pytest.skip("no results/readme_blocks.md in this tree (run `make run` first)")
    assert blocks_of((REPO / "README.md").read_text()) == blocks_of(rendered.read_text())
