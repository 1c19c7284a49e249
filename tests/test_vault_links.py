"""Issue 50's done-when, the links side, on a vault built to a published vault's shape (CI has no network: the
benchmark benchmarks/vault_links.py runs the same scenario on a real one, obsidianmd/obsidian-help's `en/`).

A planted reworded copy of one note, with aliases of its own, linked from two other notes; one `review` with a
judge that calls the copy redundant retires it. Every link that resolved before resolves after, to an active note
(those to the copy, to the survivor); the survivor carries the copy's aliases; no other note changes; revert
restores every byte. `init` makes the vault a corpus and covers its notes; the vault's `.obsidian/` is committed,
as users commit it, and Obsidian rewrites its workspace.json during the review: that holds no decision back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from vault_links import plant, scenario, shaped_vault  # noqa: E402


@pytest.mark.parametrize("retract", ["delete", "status"])
def test_a_merge_in_a_vault_keeps_every_link(tmp_path, retract):
    root = tmp_path / "vault"
    root.mkdir()
    paths = shaped_vault(root, 120)
    planted = plant(root, paths[0], [paths[2], paths[4]])
    out = scenario(root, planted, retract)
    assert out.failures == []
    fig = out.figures
    assert fig["notes"] == 121 and fig["corpus read"] == "121 of 121" and fig["problems"] == 0
    assert fig["init covers"] == 1.0 and "will read 121 note(s)" in fig["init"]
    assert fig["workspace.json left as Obsidian wrote it"]
    assert fig["links to the copy"] == 3 and fig["links to the copy now to the survivor"] == 3
    assert fig["links resolved before"] == fig["links"] == 570
    # all but the copy's own seven, which are its history
    assert fig["links kept"] == 570 - 7
    assert fig["notes changed"] == 4 and fig["commit lists the relinked notes"] and fig["revert restores every byte"]
    assert set(planted.copy_aliases) <= set(fig["survivor aliases"])
