"""The report index lists every product, marks final targets and is stable."""

from __future__ import annotations

from traintime.core.report import report_index_markdown


def test_report_index_lists_and_marks(tmp_path):
    res = tmp_path / "results"
    (res / "tables").mkdir(parents=True)
    (res / "figures").mkdir()
    (res / "tables" / "a.md").write_text("intro\n# Table A title\n| x |\n")
    (res / "tables" / "a.csv").write_text("x\n1\n")
    (res / "figures" / "f.png").write_bytes(b"\x89PNG....")
    (res / "claims.md").write_text("# Claims\n")
    (res / "report_index.md").write_text("old\n")
    md = report_index_markdown(res, [str(res / "tables" / "a.csv")])
    assert f"**`{res / 'tables' / 'a.csv'}`**" in md  # a final target is bold
    assert f"`{res / 'tables' / 'a.md'}` (" in md and "Table A title" in md
    assert "## Figures" in md and "f.png" in md and "## Claims and summaries" in md
    assert "report_index.md" not in md.split("\n", 3)[3]  # never lists itself
    assert md == report_index_markdown(res, [str(res / "tables" / "a.csv")])
