"""Journal import reads only what was appended since the last one, and the whole file when git rewrote it."""

from __future__ import annotations

import json
import os
import time

from helpers import scripted

from knomit_judge import ReviewOptions, review
from knomit_judge.recovery import sync_journal
from knomit_judge.store import Store
from knomit_judge.verdicts import Journal, JournalMarks, Verdict


def verdict(n: int) -> Verdict:
    return Verdict(
        "prune",
        f"fp{n:04d}",
        {"a": "facts/a.md", "b": f"facts/b{n}.md"},
        "distinct",
        False,
        "made by hand",
        "scripted:x",
        "prune@1",
        session="s",
    )


def append(root, *verdicts: Verdict) -> None:
    for v in verdicts:
        Journal(root).append("prune", v.journal_line())


def ids(store) -> set[str]:
    return {r[0] for r in store.db.execute("SELECT id FROM verdicts")}


def test_appended_lines_are_imported_and_the_rest_is_not_read_again(tmp_path):
    root = tmp_path
    store = Store(tmp_path / "judge.db")
    first = [verdict(i) for i in range(5)]
    append(root, *first)
    assert sync_journal(root, store) == 5
    # read past: not imported again
    store.db.execute("DELETE FROM verdicts WHERE id = ?", [first[0].id])
    store.db.conn.commit()
    assert sync_journal(root, store) == 0
    later = [verdict(i) for i in range(5, 8)]
    # a git pull or a killed session's lines
    append(root, *later)
    assert sync_journal(root, store) == 3
    assert ids(store) == {v.id for v in first[1:] + later}


def test_a_rewritten_journal_is_read_whole(tmp_path):
    root = tmp_path
    store = Store(tmp_path / "judge.db")
    append(root, *[verdict(i) for i in range(4)])
    sync_journal(root, store)
    path = Journal(root).path("prune")
    lines = path.read_bytes().splitlines(keepends=True)
    other = verdict(99)
    # as a merge or a rebase rewrites it
    lines[1] = json.dumps(other.journal_line()).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    assert sync_journal(root, store) == 1
    assert other.id in ids(store)


def test_an_unchanged_journal_is_not_read_once_its_stat_is_settled(tmp_path, monkeypatch):
    root = tmp_path
    store = Store(tmp_path / "judge.db")
    append(root, *[verdict(i) for i in range(3)])
    sync_journal(root, store)
    path = Journal(root).path("prune")
    marks = store.journal_marks()
    # read already, but within a clock tick of its last change: read again
    assert marks.unread(path) == b""
    # ... and that read was marked
    assert marks.moved
    store.put_journal_marks(marks)
    settled = time.time_ns() - 10 * JournalMarks.RACY_NS
    os.utime(path, ns=(settled, settled))
    # as if checked long after the last change
    monkeypatch.setattr(JournalMarks, "RACY_NS", -(10**19))
    sync_journal(root, store)
    marks = store.journal_marks()
    reads = []
    monkeypatch.setattr(type(path), "read_bytes", lambda self: reads.append(self) or b"")
    assert marks.unread(path) == b"" and reads == []  # the stat alone answered


def test_sessions_import_nothing_twice_and_rebuild_reads_the_whole_journal(corpus_repo, tmp_path):
    judge = scripted(tmp_path)
    review(corpus_repo.root, ReviewOptions(judge=judge))
    store = Store.for_corpus(corpus_repo.root)
    count = store.db["verdicts"].count
    store.close()
    # journalled and stored; the next session's recovery reads those lines once
    assert count
    review(corpus_repo.root, ReviewOptions(judge=judge))
    store = Store.for_corpus(corpus_repo.root)
    sizes = dict(store.db.execute("SELECT name, size FROM journal_marks").fetchall())
    assert store.db["verdicts"].count == count
    store.close()
    assert sizes
    for name, size in sizes.items():
        assert size == (corpus_repo.root / ".knomit" / "verdicts" / name).stat().st_size
    from knomit_judge.rebuild import rebuild

    (corpus_repo.root / ".knomit" / "judge.db").unlink()
    assert rebuild(corpus_repo.root)["verdicts"] == count
