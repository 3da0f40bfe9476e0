"""What every command does before and around its own work, written once.

- ``parser``: its argument parser, named ``prog`` (``posbench <command>`` under the console
  script, ``python -m <module>`` otherwise) and described by the first paragraph of the
  module's docstring, less the usage line before its ``: `` (or by the whole docstring).
- ``warnings_on_stderr``: warnings raised while a command reads (the store's skipped files,
  duplicate runs) are collected and printed on stderr as ``warning: ...``, one line each.
- ``command`` and ``Refused``: a command stops by raising ``Refused(message, code)``; the
  decorated ``main`` prints the message on stderr and returns the code (2: bad input, 1: nothing
  to do), so ``posbench <command>`` and ``python -m <module>`` exit alike. The decorator also
  holds the faults every command shares, in one place: a working folder that no longer exists is
  one line (exit 2) before any work; text a stream cannot encode (``PYTHONIOENCODING=ascii``) is
  written escaped (``\xe9``), not raised; a reader that closed stdout (``posbench show copy |
  head -c 10``) ends the command quietly with SIGPIPE's exit code, 141.
- ``flag_values`` and ``comma_problem``: a command's flags declared as options
  (``suite.options.option`` on a dataclass) are typed and judged by the rules every value obeys
  (``posbench show --length``), and a comma-separated list of names may hold no empty name
  (``--tasks a,,b``).
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
import inspect
import io
import os
import re
import sys
import tempfile
import typing
import warnings
from pathlib import Path
from typing import Callable, Iterator


class Refused(Exception):
    """A command's refusal: ``message`` goes to stderr and ``code`` is its exit status."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


SIGPIPE_EXIT = 128 + 13  # a command whose reader went away exits as one SIGPIPE ended


def _program(main: Callable, kwargs: dict) -> str:
    """The name a decorated ``main`` was called by: its ``prog`` argument, else its default, else
    ``python -m <its module>``."""
    default = inspect.signature(main).parameters.get("prog")
    if kwargs.get("prog") or default is not None:
        return str(kwargs.get("prog") or default.default)
    module = main.__module__
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else module
    return f"python -m {module.removesuffix('.__main__')}"


def check_working_folder(prog: str) -> None:
    """``Refused`` (exit 2) when the folder the command was started in no longer exists (deleted
    or moved away under it): every relative path, and torch's own libraries (``Intel oneMKL FATAL
    ERROR: Cannot load libtorch_cpu.so``), would fail later with messages that do not say why.
    ``command`` calls it first; an entry point that imports torch before its ``main`` runs can
    call it before that import."""
    try:
        os.getcwd()
    except FileNotFoundError:
        where = os.environ.get("PWD", "")
        raise Refused(f"{prog}: error: the current folder {where + ' ' if where else ''}no longer exists (deleted or "
                      "moved); cd into a folder that exists and run the command again", 2) from None


def _escape_unencodable() -> None:
    """stdout and stderr write what their encoding cannot hold as escapes (``\\xe9``) instead of
    raising mid-output (``PYTHONIOENCODING=ascii``; stderr does so already by default)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")


def _reader_gone() -> int:
    """After stdout's reader closed the pipe: stdout pointed at /dev/null, so the interpreter's
    last flush has nowhere to fail, and SIGPIPE's exit code."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return SIGPIPE_EXIT


def command(main: Callable[..., int | None]) -> Callable[..., int]:
    """``main`` that turns a ``Refused`` raised inside into its message on stderr and its exit
    code, after the checks every command shares (the module docstring): a working folder that
    exists, streams that escape what they cannot encode, a closed stdout ending it quietly."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs) -> int:
        try:
            check_working_folder(_program(main, kwargs))
            _escape_unencodable()
            try:
                return int(main(*args, **kwargs) or 0)
            finally:  # a closed pipe is met here (also after --help's exit), not in the interpreter's last flush
                sys.stdout.flush()
        except Refused as refusal:
            print(refusal, file=sys.stderr)
            return refusal.code
        except BrokenPipeError:
            return _reader_gone()

    return wrapped


def flag_values(prog: str, cls: type, given: dict) -> dict:
    """A command's flag values (``given``: the flag's name without its dashes -> the text argparse
    read) typed by ``cls``'s option declarations and judged by their rules, as a run's config is
    (``suite.options``: ``--length 1e3`` is 1000, ``--length 10**12`` past its bound);
    ``Refused`` (exit 2) naming each bad flag, its value and the valid range."""
    from suite.options import range_errors, typed_value

    hints = typing.get_type_hints(cls)
    values = {name: typed_value(hints[name], text) for name, text in given.items()}
    errors = range_errors(values, cls, "")
    if errors:
        raise Refused(f"{prog}: error: " + "; ".join(f"--{e}" for e in errors), 2)
    return values


def comma_problem(option: str, text: str, what: str = "task") -> str | None:
    """Why ``text`` (``option``'s comma-separated list of ``what`` names, such as ``--tasks``) is no
    list of names, or None: no name at all, or an empty one (``a,,b``, a leading or trailing comma)."""
    names = [name.strip() for name in text.split(",")]
    if not any(names):
        return f"{option} {text!r}: names no {what}; give {what} names separated by commas"
    if "" in names:
        example = ",".join(name for name in names if name)
        return (f"{option} {text!r}: name {names.index('') + 1} of {len(names)} is empty; give {what} names separated "
                f"by single commas: {example}")
    return None


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
