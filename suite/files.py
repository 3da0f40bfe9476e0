"""Where a sweep's files live, and how every file is written: atomically.

``results/<sweep>/<run_id>.json`` holds a run's result, ``results/<sweep>/_work/<run_id>/`` its
checkpoint and scratch files. Every write goes to a temporary file beside the target and is then
renamed over it, so parallel workers never corrupt each other and a killed run leaves no half
file. Standard library only: training, evaluation, the store and the reports all write through it.

Two rules every writer and reader of a results folder shares (where a command may write is
checked by ``suite.commandline.output_problem``):

- ``writing``: a failure to write (an ``OSError``, or a library's own error class such as
  torch.save's ``RuntimeError`` on a full disk) leaves as an ``OSError`` naming the file.
- ``read_regular`` (``open_regular``, ``append_regular``): a file of a results folder is read or
  appended to only when it is a regular file, so a FIFO or a socket named ``x.json``, ``ckpt.pt``,
  ``lock`` or ``_sweeps.jsonl`` is named and skipped or refused instead of blocking the process.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path


SWEEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SWEEP_NAME_MAX = 100  # characters: a folder name, with room for the run files and folders under it


def sweep_name_problem(sweep: str) -> str | None:
    """Why ``sweep`` cannot name a sweep folder, or None: one folder name under the results
    folder (no path separator, no leading '.' or '_', which mark hidden and internal folders)."""
    if SWEEP_NAME.fullmatch(sweep) is None:
        return (f"{sweep!r}: must be letters, digits, '.', '_' or '-', not starting with '.' or '_' "
                "(it names a folder under results_dir; '_' folders hold checkpoints and eval sets)")
    if len(sweep) > SWEEP_NAME_MAX:
        return f"{sweep[:20]!r}... ({len(sweep)} characters): at most {SWEEP_NAME_MAX} (it names a folder)"
    return None


def sweep_dir(results_dir: str | Path, sweep: str) -> Path:
    return Path(results_dir) / sweep


def result_path(results_dir: str | Path, sweep: str, run_id: str) -> Path:
    return sweep_dir(results_dir, sweep) / f"{run_id}.json"


def work_dir(results_dir: str | Path, sweep: str, run_id: str) -> Path:
    """Where a run keeps its checkpoint and scratch files (not read by the report)."""
    return sweep_dir(results_dir, sweep) / "_work" / run_id


@contextlib.contextmanager
def run_lock(results_dir, sweep: str, run_id: str):
    """Hold an exclusive lock on a run while it trains; yields False when another process holds it.

    The lock is an ``flock`` on ``_work/<run_id>/lock``, so it is released when its holder exits
    or dies, and two sweeps over the same results folder never train the same run at once. A lock
    that is not a regular file (a FIFO, a folder) is an ``OSError`` naming it, never waited on.
    """
    path = work_dir(results_dir, sweep, run_id) / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with writing(path):
        fd = _append_fd(path)  # a FIFO or a folder there is named at once, never waited on
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _jsonable(obj):
    """numpy scalars and arrays to plain Python for JSON."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


LOW_SPACE = 1 << 20  # bytes: a failed write with less than this free on its disk is a full disk


@contextlib.contextmanager
def writing(path, also: tuple[type[BaseException], ...] = ()):
    """Any ``OSError`` raised in the block, or one of ``also`` (a library's own error class for a
    failed write, such as torch.save's ``RuntimeError``), leaves as an ``OSError`` naming ``path``:
    "No space left on device" when its disk has under ``LOW_SPACE`` bytes free, else the
    library's own first line."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err
    except also as err:
        folder = Path(path).parent
        try:
            free = shutil.disk_usage(folder if folder.exists() else ".").free
        except OSError:
            free = None
        if free is not None and free < LOW_SPACE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from err
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise OSError(errno.EIO, f"{type(err).__name__}: {first}", str(path)) from err


@contextlib.contextmanager
def open_regular(path):
    """``path`` open for reading (binary) when it is a regular file; an ``OSError`` naming it
    otherwise (a FIFO, a socket, a device or a folder), raised without waiting for a writer: the
    file is opened non-blocking and checked before anything is read."""
    kind = _not_regular(os.stat(path).st_mode)
    if kind is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            kind = _not_regular(os.fstat(fd).st_mode)  # the file opened is the file checked
            if kind is None:
                os.set_blocking(fd, True)
                with os.fdopen(fd, "rb", closefd=False) as fh:
                    yield fh
                    return
        finally:
            os.close(fd)
    raise OSError(errno.EINVAL, f"not a regular file but {kind}", str(path))


def read_regular(path) -> bytes:
    """The bytes of ``path`` when it is a regular file (``open_regular``); an ``OSError`` naming
    it otherwise, raised without waiting for a writer."""
    with open_regular(path) as fh:
        return fh.read()


def _append_fd(path) -> int:
    """A descriptor of ``path`` (created if missing, mode 0666 less the umask) open for appending
    when it is a regular file; an ``OSError`` naming it otherwise, at once: a FIFO is never waited
    on for a reader (opened non-blocking, and checked before and after the open)."""
    if os.path.exists(path) and (kind := _not_regular(os.stat(path).st_mode)) is not None:
        raise OSError(errno.EINVAL, f"not a regular file but {kind}", str(path))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a FIFO made after the check, with no reader
            raise OSError(errno.EINVAL, "not a regular file but a FIFO", str(path)) from None
        raise
    if (kind := _not_regular(os.fstat(fd).st_mode)) is not None:
        os.close(fd)
        raise OSError(errno.EINVAL, f"not a regular file but {kind}", str(path))
    os.set_blocking(fd, True)
    return fd


def append_regular(path, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing) in one write, when it is a regular file
    (``_append_fd``); a failure is an ``OSError`` naming the file (``writing``)."""
    with writing(path):
        fd = _append_fd(path)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                                         (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")) if test(mode)), "not a file")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path``: a reader sees the
    old file or the whole new one, and no temporary file survives a failure. The file gets the
    mode a plain ``open`` would give (0644 under the usual umask), so a shared results folder
    stays readable by the group. A failure is an ``OSError`` naming the file (``writing``)."""
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode() if isinstance(data, str) else data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def write_json_atomic(path: Path, payload: dict) -> None:
    """``payload`` as JSON, written by ``write_atomic``."""
    write_atomic(path, json.dumps(payload, allow_nan=True, default=_jsonable))


SET_ASIDE = "_set_aside"  # a folder's files set aside as not what they should be ('_': never read as results)


def set_aside(path: str | Path) -> Path:
    """Move what is at ``path`` (a damaged result or cache file, another run's file, a folder, a
    FIFO) to ``<its folder>/_set_aside/<name>.damaged-<n>`` (n: the first number free), where no
    reader looks; nothing is deleted. Returns the new path."""
    path = Path(path)
    folder = path.parent / SET_ASIDE
    folder.mkdir(exist_ok=True)
    n = 1
    while os.path.lexists(target := folder / f"{path.name}.damaged-{n}"):
        n += 1
    os.rename(path, target)
    return target
