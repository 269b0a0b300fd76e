"""Run directories are never shared: each run claims its own and holds an exclusive lock on it
(`<run dir>/.lock`, an advisory `flock` released by the kernel when the process ends, however it
ends), taken before anything is written there.

- `claim(path)`: the directory the run will write into. A default directory (a time stamp) that
  another run created already gets a suffix (`-2`, `-3`, ...), created atomically, so two runs
  started in the same second get two directories.
- `lock(path)`: the lock, or a one-line `RunDirError` when another live process holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shlex
from pathlib import Path

LOCK_NAME = ".lock"
_held: dict[Path, int] = {}  # run dir -> the open lock file of this process


class RunDirError(ValueError):
    """A run directory that cannot be used; the message is one line."""


def claim(path: str | Path, unique: bool) -> Path:
    """Create the run directory `path` -> it; with `unique`, `path-2`, `path-3`, ... instead when
    `path` exists already. Without `unique` an existing directory is used as it is."""
    if not str(path).strip():
        raise RunDirError("hydra.run.dir='' is invalid: must name a directory for the run's files")
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not unique:
            path.mkdir(parents=True, exist_ok=True)
            return path
        for n in range(1, 10_000):
            candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
            try:
                candidate.mkdir()  # atomic: exactly one process creates it
                return candidate
            except FileExistsError:
                continue
    except OSError as err:  # a file where a directory goes, no permission, a read-only disk
        where = f" ({err.filename})" if err.filename and str(err.filename) != str(path) else ""
        raise RunDirError(f"{str(path)!r} cannot be a run directory: {err.strerror or err}{where}") from None
    raise RunDirError(f"hydra.run.dir={str(path)!r}: 10,000 runs exist with this name; choose another directory")


def holder(path: str | Path) -> int | None:
    """The pid written by the process that holds `path`'s lock, or None when no live process holds it."""
    lock_file = Path(path) / LOCK_NAME
    if Path(path).resolve() in _held:
        return os.getpid()
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except OSError:
        text = lock_file.read_text().strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)


def lock(path: str | Path, key: str = "hydra.run.dir") -> Path:
    """Take the exclusive lock of run directory `path` for this process (again: a no-op) -> `path`.
    `RunDirError` names the process that holds it."""
    path = Path(path).resolve()
    if path in _held:
        return path
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        pid = (path / LOCK_NAME).read_text().strip() or "?"
        raise RunDirError(f"{key}={str(path)!r} is in use by another run (process {pid}); two runs never share "
                          "a directory: wait for it, or choose another directory") from None  # fmt: skip
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _held[path] = fd
    return path


def is_held(path: str | Path) -> bool:
    """Whether this process holds the lock of run directory `path`."""
    return Path(path).resolve() in _held


def release(path: str | Path) -> None:
    """Give up this process's lock of `path` (the file stays; a lock ends with the process anyway)."""
    fd = _held.pop(Path(path).resolve(), None)
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def fresh_file(path: str | Path) -> Path:
    """`path`, or the first of `<stem>-2<suffix>`, `<stem>-3<suffix>`, ... that does not exist: a
    default output name that never replaces an earlier command's file."""
    path = Path(path)
    for n in range(1, 10_000):
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists():
            return candidate
    raise RunDirError(f"{str(path)!r}: 10,000 files exist with this name; give output=")


def runs_under(path: str | Path) -> str | None:
    """What shows that a directory anywhere under `path` holds a run (a multirun's jobs, whose
    folders nest where a swept value holds a `/`, as `init_from=<a path>` does), as `<job dir>/<its
    checkpoint or summary>` relative to `path`, or None."""
    path = Path(path)
    found = sorted(p for name in ("summary.json", "last.pt") for p in path.rglob(name)
                   if not any(part.startswith(".") for part in p.relative_to(path).parts))  # fmt: skip
    for hit in found:
        job = hit.parent.parent if hit.name == "last.pt" and hit.parent.name == "checkpoints" else hit.parent
        held = holds_run(job)
        if held:
            return str(job.relative_to(path) / held)
    return None


def holds_run(path: str | Path) -> str | None:
    """What shows that directory `path` holds a run already (its checkpoint or summary), or None."""
    path = Path(path)
    for name in ("checkpoints/last.pt", "summary.json"):
        if (path / name).exists():
            return name
    return None


def override_value(path: Path | str, interpolations: bool = False) -> str:
    """`path` as the value of a Hydra override (quoted when it has characters Hydra would parse,
    such as the `=` of a multirun job's folder, `seed=0`), read back as it is; with
    `interpolations`, a `${...}` in it stays an interpolation (a sweep's job folder pattern)."""
    text = str(path)
    if re.fullmatch(r"[\w./+@-]+", text):
        return text
    # inside Hydra's quotes a backslash is literal unless backslashes precede a quote (or the closing one) or an
    # interpolation's `${`: such a run is doubled, then the quote or the `${` escaped
    def escaped(m: re.Match) -> str:
        return m.group(1) * 2 + ("" if not m.group(2) else "\\" + m.group(2))

    special = r"'|$" if interpolations else r"'|\$\{|$"
    return "'" + re.sub(rf"(\\*)({special})", escaped, text) + "'"


def shell_override(key: str, path: Path | str) -> str:
    """`key=path` as one word of a shell command line that Hydra reads back as `path`, for the
    commands the scripts print (`continue with: python scripts/train.py resume=...`)."""
    word = f"{key}={override_value(path)}"
    if re.fullmatch(r"[\w./+@=-]+", word):
        return word
    return f'"{word}"' if not re.search(r'["$`\\!]', word) else shlex.quote(word)
