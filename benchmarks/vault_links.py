#!/usr/bin/env python3
"""vault_links: a merge in a real vault keeps every link (issue 50's done-when, the links side).

    .venv/bin/python benchmarks/vault_links.py --vault DIR [--retract delete|status] [--json]
    .venv/bin/python benchmarks/vault_links.py --shaped [--notes 120]

DIR is a published Obsidian vault nobody here wrote (e.g. obsidianmd/obsidian-help's `en/`, brought with the
search tool's `fetch` into /tmp: its text is never copied into this repository); `--shaped` builds one of the same
shape instead (what CI has: tests/test_vault_links.py). The vault is copied to a temporary git repository,
configured by hand (`[corpus] paths = ["**/*.md"]`, `front_matter = "optional"`) and gets a planted reworded
copy of one note, with aliases of its own and links to it from two other notes (a wikilink, one to a heading
with display text, a Markdown link with %20). One `review` with a scripted judge that calls the copy redundant
follows, through the real CLI. Then: the copy is retired; every link that resolved before resolves after to an
active note (those to the copy, to the survivor); the survivor carries the copy's aliases; no other note
changed; `links` finds no link the decision broke; `revert` restores every byte. Exit 1 when any of it fails.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-c", "from knomit_judge.cli import main; main()"]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "-q", *args], capture_output=True, text=True)


# -- a vault shaped like a published one (CI has no network: this is its copy of the shape)

TOPICS = ["backups", "replication", "indexes", "vacuum", "connection pools", "migrations", "locks", "caching",
          "queues", "retries", "timeouts", "dashboards", "alerts", "deploys", "feature flags", "secrets",
          "certificates", "dns", "load balancers", "rate limits", "logs", "traces", "budgets", "on-call"]
VERBS = ["keeps", "breaks", "hides", "slows", "protects", "multiplies", "drains", "starves", "warms", "blocks"]
THINGS = ["the primary", "a replica", "the nightly job", "every client", "the scheduler", "a stale cache",
          "the write path", "the read path", "an old branch", "the pager", "the runbook", "a cold start"]


def _sentence(rng: random.Random, topic: str) -> str:
    return f"{rng.choice(THINGS).capitalize()} {rng.choice(VERBS)} {topic} when {rng.choice(THINGS)} " \
           f"{rng.choice(VERBS)} {rng.choice(TOPICS)}."


def shaped_vault(root: Path, notes: int = 120, seed: int = 0) -> list[str]:
    """A vault of `notes` notes titled by file name in folders: aliases, tags, notes without front matter,
    headings and block ids, wikilinks (display text, heading, block, path), embeds of attachments and of
    notes, Markdown links with %20, and link-like text inside code."""
    rng = random.Random(seed)
    folders = ["Areas/Databases", "Areas/Networking", "Projects", "Resources", "Daily"]
    names = [f"{TOPICS[i % len(TOPICS)].capitalize()} note {i}" for i in range(notes)]
    paths = [f"{folders[i % len(folders)]}/{name}.md" for i, name in enumerate(names)]
    (root / "Attachments").mkdir(parents=True, exist_ok=True)
    for i in range(8):
        (root / "Attachments" / f"diagram {i}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes([i]) * 16)
    for i, path in enumerate(paths):
        topic = TOPICS[i % len(TOPICS)]
        front = []
        if i % 3 == 0:
            front.append("aliases:\n" + "".join(f"  - {topic} {kind} {i}\n" for kind in ("guide", "notes")))
        if i % 4 == 0:
            front.append(f"tags: [{topic.replace(' ', '-')}, ops]\n")
        if i % 5 == 0:
            front.append(f'related: "[[{names[(i + 7) % notes]}]]"\n')
        head = "---\n" + "".join(front) + "---\n" if front else ""
        other, third = names[(i + 1) % notes], names[(i + 11) % notes]
        body = [_sentence(rng, topic), "", "## Why it matters", "", _sentence(rng, topic) + f" ^why-{i}", "",
                f"See [[{other}]], [[{third}#Why it matters|why {third.lower()}]], [[{other}#^why-{(i + 1) % notes}]].",
                f"![[diagram {i % 8}.png]]", "", "## How to check", "", _sentence(rng, topic)]
        if i % 6 == 0:
            rel = _rel(paths[(i + 3) % notes], path)
            body += ["", f"More in [{names[(i + 3) % notes]}]({rel.replace(' ', '%20')})."]
        if i % 7 == 0:
            body += ["", f"Also [[{paths[(i + 5) % notes][:-3]}]] and ![[{names[(i + 2) % notes]}#How to check]]."]
        if i % 9 == 0:
            body += ["", "Typed as `[[Some note]]`:", "", "```md", f"[[{other}]] and [x]({other}.md)", "```"]
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(head + "\n".join(body) + "\n", encoding="utf-8")
    return paths


def _rel(target: str, source: str) -> str:
    import posixpath
    return posixpath.relpath(target, posixpath.dirname(source) or ".")


# -- the planted copy and what the decision must keep

SWAPS = {"the": "this", "a": "one", "and": "as well as", "is": "is in fact", "you": "one", "can": "may",
         "to": "so as to", "use": "make use of", "when": "whenever", "note": "page", "notes": "pages"}


def reworded(text: str) -> str:
    """The same claim in other words: a few words swapped (never inside a link, code or a heading)."""
    keep = re.compile(r"(!?\[\[[^\]]*\]\]|\]\([^)]*\)|`[^`\n]*`|^#.*$|^```.*?^```)", re.M | re.S)
    parts = keep.split(text)
    swap = re.compile(r"\b(" + "|".join(SWAPS) + r")\b")
    return "".join(part if i % 2 else swap.sub(lambda m: SWAPS[m.group(1)], part) for i, part in enumerate(parts))


@dataclass
class Plant:
    original: str
    copy: str
    copy_aliases: list[str]
    linkers: list[str]


def plant(root: Path, original: str, linkers: list[str]) -> Plant:
    """A reworded copy of `original` beside it, with two aliases of its own, linked from the two `linkers`."""
    src = (root / original).read_text(encoding="utf-8")
    front = re.match(r"\A---\n.*?\n---\n", src, re.S)
    body = src[front.end():] if front else src
    name = Path(original).stem
    copy = str(Path(original).with_name(f"{name} (reworded).md"))
    aliases = [f"{name} in other words", f"{name} restated"]
    (root / copy).write_text("---\naliases:\n" + "".join(f"  - {a}\n" for a in aliases) + "---\n" + reworded(body),
                             encoding="utf-8")
    copy_name = Path(copy).stem
    heading = next((m.group(1).strip() for m in re.finditer(r"^#{2,6} (.+)$", body, re.M)), None)
    first = root / linkers[0]
    first.write_text(first.read_text(encoding="utf-8").rstrip("\n") + f"\n\nSee also [[{copy_name}]]"
                     + (f" and [[{copy_name}#{heading}|its {heading.lower()}]]" if heading else "") + ".\n",
                     encoding="utf-8")
    second = root / linkers[1]
    rel = _rel(copy, linkers[1]).replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    second.write_text(second.read_text(encoding="utf-8").rstrip("\n") + f"\n\nThe same, [said again]({rel}).\n",
                      encoding="utf-8")
    return Plant(original, copy, aliases, linkers)


@dataclass
class Outcome:
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def resolved(root: Path) -> tuple[dict[tuple[str, int], str | None], set[str], dict[str, tuple[str, ...]]]:
    """Each link of each active note by (note, position) and where it leads; the active notes; their aliases."""
    from knomit_judge.config import load_config
    from knomit_judge.corpus import load_corpus
    from knomit_judge.links import vault_of
    config = load_config(root)
    vault = vault_of(load_corpus(root, config.corpus.max_fact_bytes, layout=config.corpus))
    where = {(note, i): vault.resolve(link)[0] for note, links in vault.links.items() if vault.active(note)
             for i, link in enumerate(links)}
    active = {p for p in vault.texts if vault.active(p)}
    return where, active, dict(vault.aliases)


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] not in (".git", ".knomit")}


def scenario(root: Path, p: Plant, retract: str = "delete") -> Outcome:
    """The vault at `root`, its `.obsidian/` committed as a user would, made a corpus by `init` and reviewed once
    with Obsidian open (its workspace.json changed, uncommitted); what the decision kept."""
    from knomit_judge.init import init_corpus
    out = Outcome()
    fig = out.figures
    git(root, "init", "-q", "-b", "main")
    settings = root / ".obsidian"
    settings.mkdir(exist_ok=True)
    for name, value in (("app.json", {}), ("workspace.json", {"main": {"type": "split", "children": []}})):
        if not (settings / name).exists():
            (settings / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the vault, with a planted reworded copy")
    said = init_corpus(root)
    fig["init"] = next((line for line in said if "will read" in line), "")
    config = root / "knomit-judge.toml"
    text = config.read_text(encoding="utf-8")
    if f'retract = "{retract}"' not in text:  # init chose the other: a person's one-key edit, committed
        config.write_text(re.sub(r'^retract = "[a-z]+"', f'retract = "{retract}"', text, flags=re.M),
                          encoding="utf-8")
        git(root, "commit", "-q", "-am", f"retract = {retract}")
    notes = [f for f in root.rglob("*.md") if not any(part.startswith(".") for part in f.relative_to(root).parts)]
    workspace = settings / "workspace.json"
    opened = workspace.read_text(encoding="utf-8").rstrip("\n") + "\n\n"  # Obsidian rewrites it while open
    workspace.write_text(opened, encoding="utf-8")
    replies = root.parent / "replies.jsonl"
    replies.write_text(json.dumps({"pass": "prune", "a": p.copy, "b": p.original, "reply": {
        "decision": "retract", "redundant": "A", "rationale": "The copy restates the original note."}}) + "\n")
    before_files = files(root)
    before, active_before, _ = resolved(root)
    fig["notes"] = len(active_before)
    fig["links"] = len(before)
    fig["links resolved before"] = sum(t is not None for t in before.values())
    fig["links to the copy"] = sum(t == p.copy for t in before.values())
    t0 = time.perf_counter()
    done = cli("links", str(root), "--json")
    fig["links check s"] = round(time.perf_counter() - t0, 2)
    broken_before = json.loads(done.stdout)["broken"]
    start = git(root, "rev-parse", "HEAD").strip()
    t0 = time.perf_counter()
    review = cli("review", str(root), "--judge", f"scripted:{replies}", "--json")
    fig["review s"] = round(time.perf_counter() - t0, 2)
    if review.returncode != 0:
        out.failures.append(f"review exited {review.returncode}: {review.stderr[-500:]}")
        return out
    result = json.loads(review.stdout)
    fig["corpus read"] = f"{result['corpus']['read']} of {result['corpus']['files']}"
    fig["init covers"] = round(result["corpus"]["read"] / len(notes), 3)
    if fig["init covers"] < 0.95:
        out.failures.append(f"init's settings read {result['corpus']['read']} of the vault's {len(notes)} notes")
    fig["problems"] = len(result["problems"])
    sha = git(root, "log", "--format=%H", "--grep", "^Knomit-Pass: prune$").split()
    if not sha:
        out.failures.append(f"no prune decision was applied: {result['passes'].get('prune')}")
        return out
    fig["workspace.json left as Obsidian wrote it"] = (workspace.read_text(encoding="utf-8") == opened
                                                       and ".obsidian/" not in git(root, "show", "--name-only", sha[0]))
    if not fig["workspace.json left as Obsidian wrote it"]:
        out.failures.append("the open vault's .obsidian/workspace.json was committed or changed by the decision")
    changed = dict(line.split("\t", 1)[::-1] for line in
                   git(root, "diff", "--name-status", "--no-renames", start, "HEAD").splitlines())
    notes_changed = {path: how for path, how in changed.items() if not path.startswith(".knomit/")}
    fig["notes changed"] = len(notes_changed)
    want = {p.copy: "D" if retract == "delete" else "M", p.original: "M", **{n: "M" for n in p.linkers}}
    if notes_changed != want:
        out.failures.append(f"the decision changed {notes_changed}, not {want}")
    after, active_after, aliases = resolved(root)
    if retract == "delete" and (root / p.copy).exists() or p.copy in active_after:
        out.failures.append(f"{p.copy} is still an active note")
    kept = moved = 0
    for (note, i), target in before.items():
        if target is None or note == p.copy:
            continue  # led nowhere before: not the decision's to mend; the retired note's own links are history
        now = after.get((note, i))
        expected = p.original if target == p.copy else target
        if now != expected or now not in active_after and not (root / now).is_file():
            out.failures.append(f"{note} link {i} led to {target}, now to {now}")
        else:
            kept += 1
            moved += target == p.copy
    fig["links kept"] = kept
    fig["links to the copy now to the survivor"] = moved
    missing = [a for a in p.copy_aliases if a not in aliases.get(p.original, ())]
    if missing:
        out.failures.append(f"the survivor lacks the copy's aliases {missing}")
    fig["survivor aliases"] = list(aliases.get(p.original, ()))
    message = git(root, "show", "-s", "--format=%B", sha[0])
    fig["commit lists the relinked notes"] = all(f"- {n}:" in message for n in p.linkers)
    if not fig["commit lists the relinked notes"]:
        out.failures.append("the commit message does not list the relinked notes")
    check = json.loads(cli("links", str(root), "--json").stdout)
    new_broken = [b for b in check["broken"] if b not in broken_before]
    fig["links broken before / after"] = f"{len(broken_before)} / {len(check['broken'])}"
    if new_broken:
        out.failures.append(f"links broken by the decision: {new_broken[:3]}")
    verdict = next(v["id"] for v in json.loads(cli("verdicts", str(root), "--json").stdout)["verdicts"]
                   if v["commit_sha"] == sha[0])
    undo = cli("revert", verdict, str(root))
    fig["revert restores every byte"] = undo.returncode == 0 and files(root) == before_files
    if not fig["revert restores every byte"]:
        out.failures.append(f"revert did not restore the vault: {undo.stderr[-300:]}")
    return out


# The real vault's plant: obsidian-help's note on aliases, linked from two notes that do not link it already.
REAL = {"original": "Linking notes and files/Aliases.md",
        "linkers": ["Getting started/Link notes.md", "Editing and formatting/Properties.md"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vault", type=Path, help="a vault to copy (read in place, never changed)")
    ap.add_argument("--shaped", action="store_true", help="build a vault of the same shape instead")
    ap.add_argument("--notes", type=int, default=120)
    ap.add_argument("--retract", choices=("delete", "status"), default="delete")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.vault and not args.shaped:
        ap.error("give --vault DIR or --shaped")
    with tempfile.TemporaryDirectory(prefix="vault-links-") as tmp:
        root = Path(tmp) / "vault"
        if args.vault:
            shutil.copytree(args.vault, root, ignore=shutil.ignore_patterns(".git"))
            p = plant(root, REAL["original"], REAL["linkers"])
        else:
            root.mkdir()
            paths = shaped_vault(root, args.notes)
            p = plant(root, paths[0], [paths[2], paths[4]])
        out = scenario(root, p, args.retract)
    out.figures["vault"] = str(args.vault or f"shaped, {args.notes} notes")
    out.figures["retract"] = args.retract
    if args.json:
        print(json.dumps({**out.figures, "failures": out.failures}, ensure_ascii=False))
    else:
        for key, value in out.figures.items():
            print(f"{key}: {value}")
        print("held" if not out.failures else "FAILED:\n" + "\n".join(f"  {f}" for f in out.failures))
    return 1 if out.failures else 0


if __name__ == "__main__":
    sys.exit(main())
