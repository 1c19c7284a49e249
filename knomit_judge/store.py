"""The sqlite store: durable tables (verdicts, replies, sessions, throttle) and derived ones."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from .errors import CorpusUnwritable
from .jsonl import dumps
from .migrations import migrate
from .models import ModelInfo, info_from_json, info_json
from .verdicts import MECHANICAL, JournalMarks, Line, Verdict, now_text

log = logging.getLogger(__name__)
DB_PATH = ".knomit/judge.db"
# Tables a dry run may write back to the db file (see Store.keep_derived): functions of the corpus text, the
# model and the code, so they hold nothing a session bought or decided. The file index is not among them:
# its changed_at times say what is fresh.
DERIVED = ("embeddings", "neighbour_sets", "candidate_lists")
# What the Models API said of a model (models.py) is derived too, from the API rather than the corpus: a dry run
# keeps it the same way, and a lost row is read again.

# a table row by column name: its values are whatever sqlite holds
Row = dict[str, Any]


class Store:
    """A corpus's sqlite db, migrated on open; a context manager that closes it."""

    # a read-only copy's derived writes, in order
    derived: list[tuple[str, tuple[Any, ...]]] | None = None
    # the db file a read-only copy was made from
    path: Path | None = None

    def __init__(self, path: Path | str | None) -> None:
        """Open (and migrate) the db at path; None opens an in-memory db for dry runs on a fresh corpus."""
        if path is None:
            self.db = sqlite_utils.Database(memory=True)
        else:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite_utils.Database(path)
                # Rollback journal, not WAL: a read-only open (dry run, status) then writes no byte at all.
                self.db.execute("PRAGMA journal_mode=DELETE")
            # .knomit a file, the db a directory, a read-only disk
            except (OSError, sqlite3.OperationalError) as e:
                raise CorpusUnwritable(f"cannot open the db {path}: {getattr(e, 'strerror', None) or e}") from None
        migrate(self.db)

    @classmethod
    def for_corpus(cls, root: Path) -> Store:
        """The db a corpus keeps at DB_PATH, made when it is not there yet."""
        return cls(Path(root) / DB_PATH)

    @classmethod
    def read_only(cls, root: Path) -> Store:
        """For dry runs and status: a copy in memory, so nothing changes the db file but keep_derived."""
        store = cls(None)
        path = Path(root) / DB_PATH
        # nothing to keep them in when the file is not there
        store.derived = [] if path.exists() else None
        store.path = path
        if path.exists():
            src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                src.backup(store.db.conn)
            finally:
                src.close()
            migrate(store.db)
        return store

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _derive(self, method: str, *args: Any) -> None:
        if self.derived is not None:
            self.derived.append((method, args))

    def keep_derived(self) -> int:
        """Write a read-only copy's derived rows (embeddings, neighbour lists, candidate lists) to the db file.

        A dry run computes them as a session would; keeping them spares the next run the work. Nothing
        else reaches the file. A db that is not at this copy's schema (it needs a migration only a
        session makes), locked by a session's write for 5 s, or on a read-only disk keeps nothing: a
        cache not kept only costs time. Returns how many writes were kept.
        """
        if not self.derived:
            return 0
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=rw", uri=True, timeout=5)
        except sqlite3.OperationalError as e:
            log.info("derived caches not kept: %s", e)
            return 0
        disk = Store.__new__(Store)
        disk.db = sqlite_utils.Database(conn)
        try:
            applied = "SELECT name FROM _sqlite_migrations ORDER BY name"
            if list(disk.db.execute(applied)) != list(self.db.execute(applied)):
                log.info("derived caches not kept: the db needs a migration (the next session makes it)")
                return 0
            with disk.db.atomic():
                for method, args in self.derived:
                    try:
                        getattr(disk, method)(*args)
                    except sqlite_utils.db.NotFoundError:
                        # the search it replaces is gone (a session ran since the copy): this one is not kept
                        pass
            kept, self.derived = len(self.derived), []
            return kept
        except sqlite3.Error as e:
            log.info("derived caches not kept: %s", e)
            return 0
        finally:
            conn.close()

    # models (derived; see models.py): what the Models API said, kept a day ----------
    def model_info(self, model: str) -> ModelInfo | None:
        row = self.db.execute("SELECT info FROM models WHERE id = ?", [model]).fetchone()
        return info_from_json(row[0]) if row else None

    def put_model_info(self, info: ModelInfo) -> None:
        self.db.table("models").upsert({"id": info.id, "info": info_json(info), "fetched_at": info.fetched_at}, pk="id")
        self._derive("put_model_info", info)

    # verdicts -----------------------------------------------------------------
    def add_verdict(self, v: Verdict) -> None:
        with self.db.atomic():
            self.db.table("verdicts").insert(v.row(), replace=True)
            # the judge model's reading of a first-reader answer: its audit row, made from the verdict
            if v.audit:
                # alone, so recovery and `rebuild` make the same row from the journal
                self._audit_row(v, v.audit)

    def _audit_row(self, v: Verdict, a: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO audits (pass, fingerprint, session, kind, first_model, strong_model, first_answer, "
            "strong_answer, miss, score, created_at, verdict, pi, stratum, born, cost_usd, first_yes, strong_yes) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                v.pass_name,
                v.fingerprint,
                v.session or "",
                a["kind"],
                a["first_model"],
                v.model,
                a["first_answer"],
                v.answer,
                int(miss_of(a, v)),
                a.get("score"),
                v.created_at,
                v.id,
                a.get("pi"),
                a.get("stratum"),
                a.get("born") or v.session,
                v.cost_usd,
                None if a.get("first_yes") is None else int(bool(a["first_yes"])),
                int(v.is_yes),
            ],
        )

    def verdict(self, verdict_id: str) -> Verdict | None:
        rows = list(self.db["verdicts"].rows_where("id = ?", [verdict_id]))
        return Verdict.from_row(rows[0]) if rows else None

    def verdict_for(self, pass_name: str, fp: str) -> Verdict | None:
        """The latest verdict on exactly this fingerprint."""
        rows = list(
            self.db["verdicts"].rows_where(
                "pass = ? AND fingerprint = ?", [pass_name, fp], order_by="created_at desc", limit=1
            )
        )
        return Verdict.from_row(rows[0]) if rows else None

    def unapplied_yes(self, pass_name: str, judge: str | None = None) -> list[Verdict]:
        """Yes verdicts not applied yet; given a judge kind, only that kind's (the others never bind it)."""
        where, args = of_judge("pass = ? AND is_yes = 1 AND reverted = 0 AND commit_sha IS NULL", [pass_name], judge)
        return [Verdict.from_row(r) for r in self.db["verdicts"].rows_where(where, args, order_by="created_at")]

    def standing_yes(self, pass_name: str, judge: str | None = None) -> list[Verdict]:
        """Per spelling pair, its latest judged verdict when that is a yes and no verdict on the pair was reverted.

        What the judge decided about the two names themselves, whatever fingerprint the question had then:
        a later `no`, or a revert of any decision on them (a restated one included), ends it. Only the
        verdicts of pairs with a judged yes leave sqlite: a session runs this every round, over every
        alias verdict the corpus ever had.
        """
        where, args = of_judge("pass = ?", [pass_name], judge)
        a, b = "json_extract(subject, '$.a')", "json_extract(subject, '$.b')"
        # the pair in either order
        pair = f"min({a}, {b}) || char(31) || max({a}, {b})"
        latest: dict[str, Row] = {}
        ended: set[str] = set()
        for row in self.db["verdicts"].rows_where(
            f"{where} AND {pair} IN (SELECT {pair} FROM verdicts WHERE {where} AND is_yes = 1 AND model != ?)",
            [*args, *args, MECHANICAL],
            order_by="created_at, rowid",
            select=f"*, {pair} AS pair",
        ):
            if row["reverted"]:
                ended.add(row["pair"])
            if row["model"] != MECHANICAL:
                latest[row["pair"]] = row
        return [Verdict.from_row(r) for k, r in latest.items() if r["is_yes"] and k not in ended]

    def answered(self, pass_name: str, judge: str | None = None) -> set[str]:
        """Fingerprints with a verdict; given a judge kind, only that kind's answers count."""
        where, args = of_judge("pass = ?", [pass_name], judge)
        return {r[0] for r in self.db.execute(f"SELECT DISTINCT fingerprint FROM verdicts WHERE {where}", args)}

    def read_first_only(self, pass_name: str, judge: str, first_model: str) -> dict[str, str]:
        """Fingerprints whose latest verdict is the first reader's (session/readers.py), answered by it alone, each with the
        session that read it: the standing no's of the audit pool."""
        where, args = of_judge("pass = ?", [pass_name], judge)
        return {
            fp: session
            for fp, model, session in self.db.execute(
                f"SELECT fingerprint, model, session FROM verdicts v WHERE {where} AND created_at = (SELECT max(created_at) "
                "FROM verdicts w WHERE w.pass = v.pass AND w.fingerprint = v.fingerprint AND w.judge = v.judge)",
                args,
            )
            if model == first_model
        }

    # audits (session/rereads.py): the judge model's second reading of the first reader's answers -------------------
    def add_draw(self, row: Row) -> None:
        """A session's record of a pass's first reader (audits.py, verdicts.DRAW_KEYS): the floor rate its new no's
        faced, how many questions it read, and whether it read or shadowed. A later record of the same session
        and pass replaces it."""
        self.db.table("audit_draws").insert(row, replace=True)

    def reader_runs(self, pass_name: str, first_model: str) -> list[tuple[str, str]]:
        """(session, state) of every session this first reader read the pass (gave no's, or read any question) or
        read its shadow sample, oldest first: the window audits.py reads is the last run of reading ones."""
        return [
            (r[0], r[1] or "reading")
            for r in self.db.execute(
                "SELECT session, state FROM audit_draws WHERE pass = ? AND first_model = ? "
                "AND (new > 0 OR coalesce(reads, 0) > 0) ORDER BY created_at, rowid",
                [pass_name, first_model],
            )
        ]

    def audit_floors(self, pass_name: str, first_model: str, sessions: list[str]) -> dict[str, float]:
        marks = ",".join("?" * len(sessions))
        return {
            s: f
            for s, f in self.db.execute(
                f"SELECT session, floor FROM audit_draws WHERE pass = ? AND first_model = ? AND session IN ({marks}) "
                "AND new > 0",
                [pass_name, first_model, *sessions],
            )
        }

    def first_nos(self, pass_name: str, first_model: str, sessions: list[str]) -> list[tuple[str, str]]:
        """(session, fingerprint) of the first reader's no's read in those sessions."""
        marks = ",".join("?" * len(sessions))
        return [
            (r[0], r[1])
            for r in self.db.execute(
                f"SELECT session, fingerprint FROM verdicts WHERE pass = ? AND model = ? AND is_yes = 0 "
                f"AND judge = 'anthropic' AND session IN ({marks})",
                [pass_name, first_model, *sessions],
            )
        ]

    def audit_rows(self, pass_name: str, first_model: str, sessions: list[str]) -> list[Row]:
        """The audits and confirmations of this first reader read in those sessions."""
        marks = ",".join("?" * len(sessions))
        cur = self.db.execute(
            f"SELECT fingerprint, session, born, kind, stratum, pi, miss, first_answer, strong_answer, cost_usd, "
            f"first_yes, strong_yes "
            f"FROM audits WHERE pass = ? AND first_model = ? AND (session IN ({marks}) OR born IN ({marks}))",
            [pass_name, first_model, *sessions, *sessions],
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def audit_scores(self, pass_name: str, first_model: str, strata: Sequence[str]) -> list[tuple[float, bool, float]]:
        """(score, miss, pi) of the pass's last audits drawn in these strata: what the miss-chance fit reads."""
        marks = ",".join("?" * len(strata))
        return [
            (r[0], bool(r[1]), r[2])
            for r in self.db.execute(
                f"SELECT score, miss, pi FROM audits WHERE pass = ? AND first_model = ? AND kind = 'audit' AND score "
                f"IS NOT NULL AND pi > 0 AND stratum IN ({marks}) ORDER BY created_at DESC LIMIT 2000",
                [pass_name, first_model, *strata],
            )
        ]

    def audit_totals(self, pass_name: str | None = None) -> dict[str, dict[str, dict[bool, int]]]:
        """Every audit and confirmation kept: pass -> kind -> miss -> count (calibrate scores the first reader)."""
        out: dict[str, dict[str, dict[bool, int]]] = {}
        for name, kind, miss, n in self.db.execute(
            "SELECT pass, kind, miss, count(*) FROM audits GROUP BY pass, kind, miss"
        ):
            if pass_name is None or name == pass_name:
                out.setdefault(name, {}).setdefault(kind, {})[bool(miss)] = n
        return out

    def verdicts(self, pass_name: str | None = None) -> list[Verdict]:
        where, args = ("pass = ?", [pass_name]) if pass_name else (None, None)
        return [Verdict.from_row(r) for r in self.db["verdicts"].rows_where(where, args, order_by="created_at, rowid")]

    def subjects_since(self, pass_name: str, since: str, judge: str | None = None) -> list[dict[str, Any]]:
        """The subjects of the pass's verdicts stored after `since`: what fresh questions were already asked."""
        where, args = of_judge("pass = ? AND created_at > ?", [pass_name, since], judge)
        return [json.loads(r[0]) for r in self.db.execute(f"SELECT subject FROM verdicts WHERE {where}", args)]

    def count_verdicts(self, pass_name: str, judge: str | None = None) -> int:
        where, args = of_judge("pass = ?", [pass_name], judge)
        return self.db.execute(f"SELECT count(*) FROM verdicts WHERE {where}", args).fetchone()[0]

    def judges(self, passes: tuple[str, ...]) -> dict[str, int]:
        """How many verdicts of these passes each kind of judge gave."""
        marks = ",".join("?" * len(passes))
        return dict(
            self.db.execute(
                f"SELECT judge, count(*) FROM verdicts WHERE pass IN ({marks}) GROUP BY judge", list(passes)
            )
        )

    def flips(self, pass_name: str, default: str, judge: str | None = None) -> tuple[int, int]:
        """(flips, measured) over the verdicts whose first order gave the default and were asked in both orders.

        Those are the swap sample (judge.swap_sample): a question whose first order was not the default is
        always asked in both, so counting it too would weigh the rate towards the yeses.
        """
        where, args = of_judge("pass = ? AND orders = 2", [pass_name], judge)
        flips = measured = 0
        for (raw,) in self.db.execute(f"SELECT by_position FROM verdicts WHERE {where}", args):
            answers = json.loads(raw) if raw else []
            if len(answers) == 2 and answers[0] == default:
                measured += 1
                flips += answers[1] != default
        return flips, measured

    def reserved_questions(self, pass_name: str, judge: str | None = None) -> int:
        """Questions of this pass in Message Batches submitted (or pending: perhaps made) and not yet collected:
        spent, not yet verdicts."""
        if judge not in (None, "anthropic") or "batches" not in self.db.table_names():
            # only the real API has batches
            return 0
        return self.db.execute(
            "SELECT count(DISTINCT r.fingerprint) FROM batch_requests r JOIN batches b ON b.id = r.batch_id "
            "WHERE b.status IN ('submitted', 'pending') AND r.pass = ? AND r.fingerprint NOT IN "
            "(SELECT fingerprint FROM verdicts WHERE pass = ?)",
            [pass_name, pass_name],
        ).fetchone()[0]

    def latest_judge(self) -> str | None:
        """The kind of judge that gave the newest judged verdict (what status assumes asks next)."""
        row = self.db.execute(
            "SELECT judge FROM verdicts WHERE judge != 'mechanical' ORDER BY created_at DESC, rowid DESC LIMIT 1"
        ).fetchone()
        return row[0] if row else None

    def mark_applied(self, verdict_id: str, sha: str) -> None:
        self.db.execute("UPDATE verdicts SET commit_sha = ? WHERE id = ?", [sha, verdict_id])
        self.db.conn.commit()

    def mark_reverted(self, verdict_id: str, reason: str) -> None:
        self.db.execute("UPDATE verdicts SET reverted = 1, revert_reason = ? WHERE id = ?", [reason, verdict_id])
        self.db.conn.commit()

    def reverted_ids(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT id FROM verdicts WHERE reverted = 1")}

    def known_ids(self, ids: list[str], where: str = "1") -> set[str]:
        """Which of these verdict ids the db holds (and match `where`), asked 500 at a time."""
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out.update(
                r[0]
                for r in self.db.execute(
                    f"SELECT id FROM verdicts WHERE {where} AND id IN ({','.join('?' * len(chunk))})", chunk
                )
            )
        return out

    # describe lines (durable, bought; see session/lines.py) ------------------
    _LINE_COLUMNS = (
        "spelling",
        "carriers",
        "model",
        "prompt",
        "line",
        "judge",
        "session",
        "cost_usd",
        "created_at",
        "facts",
        "tries",
        "why",
    )

    def _insert_lines(self, sql: str, lines: Iterable[Line]) -> None:
        with self.db.atomic():
            self.db.conn.executemany(
                sql,
                [
                    tuple(dumps(list(x.facts)) if c == "facts" else getattr(x, c) for c in self._LINE_COLUMNS)
                    for x in lines
                ],
            )

    def put_line(self, line: Line) -> None:
        self._insert_lines(
            f"INSERT OR REPLACE INTO lines ({', '.join(self._LINE_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(self._LINE_COLUMNS))})",
            [line],
        )

    def import_lines(self, lines: list[Line]) -> int:
        """Journalled lines the db lacks (a lost db, a fresh clone, another clone's pushed journal): added. A line
        the db holds is never replaced; a key the db holds as asked without a line takes the journal's line,
        or its later count of requests that gave none."""
        before = self.db.execute("SELECT count(*) FROM lines").fetchone()[0]
        self._insert_lines(
            f"INSERT INTO lines ({', '.join(self._LINE_COLUMNS)}) VALUES ({', '.join('?' * len(self._LINE_COLUMNS))}) "
            "ON CONFLICT (spelling, carriers, model, prompt) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in self._LINE_COLUMNS[4:])
            + " WHERE lines.line = '' AND (excluded.line != '' OR excluded.tries > lines.tries)",
            lines,
        )
        return self.db.execute("SELECT count(*) FROM lines").fetchone()[0] - before

    def lines(self, model: str, prompt: str) -> tuple[dict[tuple[str, str], str], dict[str, tuple[str, ...]]]:
        """Of one model and prompt version: (spelling, carriers fingerprint) -> line ("" when asked and given
        none), and spelling -> the facts its latest line was written from."""
        lines: dict[tuple[str, str], str] = {}
        facts: dict[str, tuple[str, ...]] = {}
        for spelling, carriers, line, shown in self.db.execute(
            "SELECT spelling, carriers, line, facts FROM lines WHERE model = ? AND prompt = ? "
            "ORDER BY created_at, rowid",
            [model, prompt],
        ):
            lines[(spelling, carriers)] = line
            facts[spelling] = tuple(json.loads(shown or "[]"))
        return lines, facts

    def no_lines(self, model: str, prompt: str) -> dict[tuple[str, str], tuple[int, str]]:
        """Of one model and prompt version, the keys asked and given no line: (spelling, carriers) -> (how many
        requests gave none, why the last did)."""
        return {
            (s, c): (tries, why)
            for s, c, tries, why in self.db.execute(
                "SELECT spelling, carriers, tries, why FROM lines WHERE model = ? AND prompt = ? AND line = ''",
                [model, prompt],
            )
        }

    # journal marks (derived; see verdicts.JournalMarks) -----------------------
    def journal_marks(self) -> JournalMarks:
        return JournalMarks(
            {
                r[0]: tuple(r[1:])
                for r in self.db.execute("SELECT name, size, digest, mtime_ns, ctime_ns, checked_ns FROM journal_marks")
            }
        )

    def put_journal_marks(self, marks: JournalMarks) -> None:
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO journal_marks (name, size, digest, mtime_ns, ctime_ns, checked_ns) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(name, *row) for name, row in marks.moved.items()],
            )
        marks.rows.update(marks.moved)
        marks.moved = {}

    # refusals -----------------------------------------------------------------
    def add_refusal(
        self, pass_name: str, fp: str, model: str, prompt: str, subject: dict[str, Any], *, error: str, session: str
    ) -> None:
        with self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO refusals (pass, fingerprint, model, prompt, subject, error, session, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [pass_name, fp, model, prompt, dumps(subject, ensure_ascii=False), error, session, now_text()],
            )

    def refused(self, pass_name: str, prompt: str, model: str | None = None) -> set[str]:
        """Fingerprints the API refused under this prompt version (given a model, that model's refusals: another
        model still reads them): not asked again of it."""
        where, args = (
            ("pass = ? AND prompt = ?", [pass_name, prompt])
            if model is None
            else ("pass = ? AND prompt = ? AND model = ?", [pass_name, prompt, model])
        )
        return {r[0] for r in self.db.execute(f"SELECT fingerprint FROM refusals WHERE {where}", args)}

    # reply cache --------------------------------------------------------------
    def cached_reply(self, key: str, judge: str | None = None) -> Row | None:
        where, args = of_judge("key = ?", [key], judge)
        rows = list(self.db["replies"].rows_where(where, args))
        return rows[0] if rows else None

    def cache_reply(
        self,
        key: str,
        model: str,
        prompt: str,
        text: str,
        *,
        tokens_in: int | None,
        tokens_out: int | None,
        judge: str = "anthropic",
        position: int | None = None,
    ) -> None:
        with self.db.atomic():
            self.db.table("replies").insert(
                dict(
                    key=key,
                    model=model,
                    prompt=prompt,
                    text=text,
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                    created_at=now_text(),
                    judge=judge,
                    position=position,
                ),
                replace=True,
            )

    # embeddings ---------------------------------------------------------------
    def embeddings(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            chunk = hashes[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for h, blob in self.db.execute(
                f"SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN ({marks})", [model, *chunk]
            ):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_embeddings(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        self._derive("put_embeddings", model, vectors)
        with self.db.atomic():
            self.db.table("embeddings").insert_all(
                (
                    {"model": model, "text_hash": h, "vector": v.astype(np.float32).tobytes()}
                    for h, v in vectors.items()
                ),
                replace=True,
                batch_size=500,
            )

    # neighbour lists (derived; see neighbours.py) ----------------------------
    def neighbour_sets(self, k: int) -> list[Row]:
        return [
            dict(id=r[0], rows=r[1], digest=r[2])
            for r in self.db.execute(
                "SELECT id, rows, digest FROM neighbour_sets WHERE k = ? ORDER BY used_at DESC, id DESC", [k]
            )
        ]

    def neighbour_keys(self, set_id: int) -> list[bytes]:
        blob = self.db.execute("SELECT keys FROM neighbour_sets WHERE id = ?", [set_id]).fetchone()[0]
        return [blob[i : i + 16] for i in range(0, len(blob), 16)]

    def neighbour_set(self, set_id: int) -> tuple[list[bytes], np.ndarray, np.ndarray]:
        rows, keys, idx, sims = self.db.execute(
            "SELECT rows, keys, neighbours, sims FROM neighbour_sets WHERE id = ?", [set_id]
        ).fetchone()
        idx = np.frombuffer(idx, dtype=np.int64).reshape(rows, -1).copy()
        sims = np.frombuffer(sims, dtype=np.float64).reshape(rows, -1).copy()
        return [keys[i : i + 16] for i in range(0, len(keys), 16)], idx, sims

    def touch_neighbour_set(self, set_id: int) -> None:
        with self.db.atomic():
            self.db.execute("UPDATE neighbour_sets SET used_at = ? WHERE id = ?", [now_text(), set_id])

    def put_neighbour_set(
        self, set_id: int | None, k: int, digest: str, search: tuple[list[bytes], np.ndarray, np.ndarray], keep: int
    ) -> None:
        """Store a search (its row keys, lists and similarities, as neighbour_set gives them back), replacing the one
        it was updated from; only the `keep` most recently used stay."""
        self._derive("put_neighbour_set", set_id, k, digest, search, keep)
        keys, idx, sims = search
        row = dict(
            k=k,
            rows=len(keys),
            digest=digest,
            keys=b"".join(keys),
            neighbours=np.ascontiguousarray(idx, dtype=np.int64).tobytes(),
            sims=np.ascontiguousarray(sims, dtype=np.float64).tobytes(),
            used_at=now_text(),
        )
        with self.db.atomic():
            if set_id is None:
                self.db.table("neighbour_sets").insert(row)
            else:
                self.db.table("neighbour_sets").update(set_id, row)
            self.db.execute(
                "DELETE FROM neighbour_sets WHERE id NOT IN "
                "(SELECT id FROM neighbour_sets ORDER BY used_at DESC, id DESC LIMIT ?)",
                [keep],
            )

    # candidate lists (derived; see candidate_lists.py) ------------------------
    def candidate_list(self, pass_name: str, digest: str) -> Row | None:
        cur = self.db.execute("SELECT * FROM candidate_lists WHERE pass = ? AND digest = ?", [pass_name, digest])
        row = cur.fetchone()
        return dict(zip([c[0] for c in cur.description], row)) if row else None

    def put_candidate_list(self, pass_name: str, digest: str, encoded: Row) -> None:
        self._derive("put_candidate_list", pass_name, digest, encoded)
        with self.db.atomic():
            self.db.table("candidate_lists").insert(
                {"pass": pass_name, "digest": digest, "made_at": now_text(), **encoded}, replace=True
            )

    # calibrations (calibrate.py): each run's result, the report shows the last ----------------------------
    def add_calibration(self, result: Row) -> None:
        with self.db.atomic():
            self.db.table("calibrations").insert(
                {
                    "created_at": result["created_at"],
                    "labels": result["labels"],
                    "model": result["judge"],
                    "result": dumps(result, ensure_ascii=False),
                }
            )

    def last_calibration(self) -> Row | None:
        """The last calibration's result, or None."""
        if "calibrations" not in self.db.table_names():
            return None
        row = self.db.execute("SELECT result FROM calibrations ORDER BY id DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row else None

    # sessions and throttle ----------------------------------------------------
    def start_session(self, session_id: str) -> None:
        with self.db.atomic():
            self.db.table("sessions").insert(
                {"id": session_id, "started_at": now_text(), "passes": "{}", "commits": "[]"}
            )

    def end_session(
        self,
        session_id: str,
        passes: dict[str, Row],
        cost_usd: float | None,
        commits: list[str],
        corpus: Row | None = None,
    ) -> None:
        with self.db.atomic():
            self.db.table("sessions").update(
                session_id,
                {
                    "ended_at": now_text(),
                    "passes": dumps(passes),
                    "cost_usd": cost_usd,
                    "commits": dumps(commits),
                    "corpus": dumps(corpus) if corpus else None,
                },
            )

    def sessions(self, limit: int = 10) -> list[Row]:
        rows = self.db.execute(
            "SELECT id, started_at, ended_at, passes, cost_usd, commits, corpus FROM sessions "
            "WHERE ended_at IS NOT NULL ORDER BY started_at DESC, rowid DESC LIMIT ?",
            [limit],
        ).fetchall()
        return [
            dict(
                id=r[0],
                started_at=r[1],
                ended_at=r[2],
                passes=json.loads(r[3]),
                cost_usd=r[4],
                commits=json.loads(r[5]),
                corpus=json.loads(r[6]) if r[6] else None,
            )
            for r in rows
        ]

    def last_session(self, pass_name: str, judge: str | None = None) -> tuple[str | None, str | None]:
        """When this pass's last recorded session (of this kind of judge) started and ended; Nones before its first."""
        where, args = of_judge("t.pass = ?", [pass_name], judge)
        row = self.db.execute(
            f"SELECT s.started_at, coalesce(s.ended_at, s.started_at) FROM throttle t "
            f"JOIN sessions s ON s.id = t.session "
            f"WHERE {where.replace('judge =', 't.judge =')} ORDER BY t.rowid DESC LIMIT 1",
            args,
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def record_throttle(self, row: Row) -> None:
        with self.db.atomic():
            self.db.table("throttle").insert(row, replace=True)

    def throttle_rows(self, pass_name: str, limit: int = 1000, judge: str | None = None) -> list[Row]:
        """This pass's throttle record of each session, newest first (given a judge kind, that kind's sessions)."""
        where, args = of_judge("pass = ?", [pass_name], judge)
        cur = self.db.execute(f"SELECT * FROM throttle WHERE {where} ORDER BY rowid DESC LIMIT ?", [*args, limit])
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def throttle_history(self, pass_name: str, limit: int) -> list[Row]:
        """throttle_rows with each session's outcome for the pass (`caught-up`, `defunded`, ...) as `outcome`."""
        cur = self.db.execute(
            "SELECT t.*, json_extract(s.passes, '$.\"' || t.pass || '\".state') AS outcome FROM throttle t "
            "LEFT JOIN sessions s ON s.id = t.session WHERE t.pass = ? ORDER BY t.rowid DESC LIMIT ?",
            [pass_name, limit],
        )
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def miss_of(a: dict[str, Any], v: Verdict) -> bool:
    """Whether the judge model's verdict `v`, reading a first-reader answer (`a`, its audit record), found a miss:
    an audited no it answered otherwise, or a shadow no on a question it said yes to."""
    if a["kind"] == "shadow":
        return v.is_yes and not a.get("first_yes")
    return a["kind"] == "audit" and v.answer != a["first_answer"]


def of_judge(where: str, args: list[Any], judge: str | None) -> tuple[str, list[Any]]:
    """Narrow a WHERE clause to one kind of judge (None: every kind)."""
    return (where, args) if judge is None else (f"{where} AND judge = ?", [*args, judge])
