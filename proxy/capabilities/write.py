"""Writing capabilities.yaml safely: one function every writer goes through.

`rewrite_file(path, edit)` takes the file lock, re-reads the file, asks `edit` for
the new text and replaces the file atomically (temp file beside it, fsync,
rename, fsync of the directory), so two processes never lose each other's
writes and a crash mid-write leaves the old file whole. A symlinked file stays
a symlink: the link's target is what gets replaced. The file's mode is kept,
and a file a person made read-only is never written, even by root.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

StatKey = tuple[int, int, int]
"""(mtime_ns, size, inode): what tells a reload that the file changed."""

LOCK_TIMEOUT = 10.0


@dataclass(frozen=True)
class Written:
    """The outcome of a rewrite: the text now on disk and its stat."""

    text: str
    stat: StatKey | None
    changed: bool


def stat_key(path: Path) -> StatKey | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def target_of(path: Path) -> Path:
    """The file a write must replace: a symlink's final target, else `path` itself."""
    return Path(os.path.realpath(path))


def rewrite_file(
    path: Path, edit: Callable[[str | None], str | None], *, new_mode: int = 0o644
) -> Written | None:
    """Under the file lock: current text (None when missing) -> `edit` -> file.

    `edit` returns the new text, or None to leave the file alone (then this
    returns None). Raises OSError (read-only, disk full, lock timeout) and
    UnicodeDecodeError; the file is unchanged then.
    """
    target = target_of(path)
    with FileLock(f"{target}.lock", timeout=LOCK_TIMEOUT):
        # Re-read under the lock: a person or another worker may have changed it.
        before = stat_key(target)
        # Bytes decoded as they are (no newline translation): a person's CRLF file must
        # reach `edit`, and so the disk, with its CRLFs; `read_text` would make them LF.
        current = None if before is None else target.read_bytes().decode("utf-8")
        text = edit(current)
        if text is None:
            return None
        if text == current:
            return Written(text, before, changed=False)
        mode = new_mode if before is None else target.stat().st_mode & 0o7777
        if not mode & 0o222:  # a person made it read-only: respect that even as root
            raise PermissionError(f"{path} is read-only")
        return Written(text, write_atomically(target, text, mode), changed=True)


def write_atomically(target: Path, text: str, mode: int) -> StatKey:
    """Temp file beside `target`, fsync, rename, fsync the dir; the stat written
    (rename keeps it, so a later replace by another process is still a change)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
            st = os.fstat(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return (st.st_mtime_ns, st.st_size, st.st_ino)
