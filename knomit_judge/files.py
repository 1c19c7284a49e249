"""A file written whole or not at all: a temp file beside it, fsync, rename; its permission bits kept."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def umask() -> int:
    """The process umask, read without changing it (os.umask can only be read by setting it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode(path: Path) -> int | None:
    """The permission bits of the file at path, or None when there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return None


def atomic_write(path: Path, text: str | bytes, mode: int | None = None, prefix: str = ".knomit-") -> None:
    """Write via a temp file, fsync and rename, so a half-written fact never exists.

    The file keeps its mode (mkstemp makes 0600, which would shut out every other reader of the
    corpus); a new file gets what the umask gives, as any editor's would. `mode` sets it instead.
    The temp file is `prefix*.tmp` beside it (recovery finds a corpus's leftovers by gitops.TMP_GLOB).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = file_mode(path)
    if mode is None:
        mode = 0o666 & ~umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dirfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)
