"""docs/python.md's walkthrough runs: its ```python blocks, in order, in one namespace (as a
notebook's cells), from an empty directory, so the graphs and placements it names by name are
the installed package's own."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python.md"


def blocks(text):
    """The code of every ```python block of `text`, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_walkthrough_runs(tmp_path, monkeypatch):
    code = blocks(PAGE.read_text())
    assert len(code) >= 6, "docs/python.md: fewer python blocks than the walkthrough has"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__walkthrough__"}
    for i, block in enumerate(code, 1):
        exec(compile(block, f"docs/python.md, python block {i}", "exec"), namespace)
    # What the blocks left: the beamformer's stream, ended with its report, and a whole run.
    assert namespace["report"]["frames"] == 40
    assert namespace["beams"].shape == (40, 64, 3)
    assert namespace["run"].passed


def test_blocks_are_found():
    text = "a\n```python\nx = 1\n```\n```sh\nno\n```\n```python\ny = 2\n```\n"
    assert blocks(text) == ["x = 1\n", "y = 2\n"]
