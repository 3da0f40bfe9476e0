"""What every command does before and around its own work, written once.

- ``parser``: its argument parser, named ``prog`` (``posbench <command>`` under the console
  script, ``python -m <module>`` otherwise) and described by the first paragraph of the
  module's docstring, less the usage line before its ``: `` (or by the whole docstring).
- ``warnings_on_stderr``: warnings raised while a command reads (the store's skipped files,
  duplicate runs) are collected and printed on stderr as ``warning: ...``, one line each.
- ``command`` and ``Refused``: a command stops by raising ``Refused(message, code)``; the
  decorated ``main`` prints the message on stderr and returns the code (2: bad input, 1: nothing
  to do), so ``posbench <command>`` and ``python -m <module>`` exit alike.
- ``output_problem`` and ``check_output``: every option that names where a command writes (and
  ``results_dir`` of a run) is checked right after parsing, before any work and without writing
  there: empty, a file where a folder is needed (or a folder where a file is), or a place no
  file can be created in is a one-line refusal with exit 2 naming the option, the path and why.

Standard library only, so a command of any stage can use it.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterator


class Refused(Exception):
    """A command's refusal: ``message`` goes to stderr and ``code`` is its exit status."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def command(main: Callable[..., int | None]) -> Callable[..., int]:
    """``main`` that turns a ``Refused`` raised inside into its message on stderr and its exit code."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs) -> int:
        try:
            return int(main(*args, **kwargs) or 0)
        except Refused as refusal:
            print(refusal, file=sys.stderr)
            return refusal.code

    return wrapped


def output_problem(path, kind: str = "folder", probe: bool = True) -> str | None:
    """Why a command cannot write its output at ``path``, or None. ``kind``: ``"folder"`` (the
    command creates it if needed and writes files in it) or ``"file"`` (it writes that file).
    Nothing is created: the nearest folder that exists on the way to ``path`` must take a new
    file (a probe file, written and removed at once; ``probe=False`` skips it and checks only the
    path's shape). Root ignores permission bits, so the probe, not ``os.access``, decides."""
    text = "" if path is None else str(path)
    if not text.strip():
        return f"empty; name a {kind} (an empty path would write into the current folder)"
    target = Path(text)
    if kind == "folder" and target.exists() and not target.is_dir():
        return "cannot write under it: it is a file, not a folder"
    if kind == "file" and target.is_dir():
        return "cannot write it: it is a folder, not a file"
    if kind == "file" and target.exists() and not target.is_file():
        return "cannot write it: it is not a regular file"
    nearest = target if kind == "folder" else target.parent
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if nearest.exists() and not nearest.is_dir():
        return f"cannot write under it: {nearest} is a file, not a folder"
    if not probe:
        return None
    try:
        fd, name = tempfile.mkstemp(dir=nearest, prefix=".write-probe.")
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        return f"cannot write under it: no file can be created in {nearest} ({err.strerror or err})"
    return None


def check_output(prog: str, option: str, path, kind: str = "folder") -> Path:
    """``path`` as a ``Path`` when the command can write its output there (``kind``: a folder it
    fills or a file it writes); ``Refused`` (exit 2) naming ``option``, the path and why otherwise."""
    problem = output_problem(path, kind)
    if problem is not None:
        raise Refused(f"{prog}: error: {option} {str('' if path is None else path)!r}: {problem}", 2)
    return Path(path)


def plain(text: str) -> str:
    """``text`` as a terminal shows it: the docstrings' reStructuredText literal markup (a name
    between double backquotes) left off, the name kept."""
    return re.sub(r"``(.+?)``", r"\1", text, flags=re.DOTALL)


def description(doc: str) -> str:
    """The first paragraph of a command module's docstring, less its usage line before ``: ``,
    as plain text (``plain``)."""
    return plain(" ".join(doc.strip().split("\n\n")[0].split()).split(": ", 1)[-1])


def as_prog(doc: str, prog: str) -> str:
    """``doc`` with the module's own ``python -m <module>`` (the one its first line names) written
    as ``prog``, the name the command was called by (``posbench lmeval``), and as plain text."""
    own = re.match(r"\s*``(python -m [\w.]+)", doc)
    return plain(doc.replace(own.group(1), prog) if own else doc)


def parser(prog: str, doc: str, whole_doc: bool = False) -> argparse.ArgumentParser:
    """A command's parser, described by ``description(doc)``, or by all of ``doc`` as written
    (``whole_doc``: a command whose help is its usage examples, under the name it was called by:
    ``as_prog``)."""
    if whole_doc:
        return argparse.ArgumentParser(prog=prog, description=as_prog(doc, prog),
                                       formatter_class=argparse.RawDescriptionHelpFormatter)
    return argparse.ArgumentParser(prog=prog, description=description(doc))


@contextlib.contextmanager
def warnings_on_stderr() -> Iterator[list[warnings.WarningMessage]]:
    """Collect every warning raised in the block (the list it yields), then print each on stderr,
    also when the block ends a command early."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield caught
        finally:
            for w in caught:
                print(f"warning: {w.message}", file=sys.stderr)
