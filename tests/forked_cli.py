"""Run many ``python -m <module> <args>`` (or ``python script.py <args>``) commands as forked
children of one process that has already imported torch, Hydra and the suite, so each costs a
fork instead of a fresh interpreter.

Each child is a real process: its own exit code, its stdout and stderr captured at the file
descriptors (tracebacks included), Hydra's global state as a new interpreter has it (the parent
never initializes Hydra), the environment and argv of the command. Only the imports are shared.
Two ways in: ``run_all(jobs)`` (``python -m tests.forked_cli`` with a JSON list of jobs on stdin,
printing a JSON list of ``[exit code, stderr + stdout]``) runs a table of commands two at a time;
``run(argv, ...)`` sends one command to a server (``--serve``) started once per test process and
returns a ``subprocess.CompletedProcess``, as ``subprocess.run(argv, capture_output=True,
text=True)`` would.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MAX_CHILDREN = 2


def _preload() -> None:
    """The imports every command of the suite makes (not the entry modules themselves, which run
    fresh as ``__main__`` in each child)."""
    import hydra  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - torch.optim's constructors import it (seconds) in every training run

    import suite.config.build  # noqa: F401
    import suite.config.validate  # noqa: F401
    import suite.lifecycle  # noqa: F401


_warmed: set[str] = set()


def _warm(module: str) -> None:
    """Import what ``module`` (for a package, its ``__main__``) imports once in the parent, so its
    children find pandas, matplotlib or scipy already loaded. The entry module itself leaves
    ``sys.modules`` again: each child runs it fresh as ``__main__``, as ``python -m`` would. A
    module that fails to import fails in the child, where it is reported."""
    if not module or module in _warmed:
        return
    _warmed.add(module)
    import importlib
    import importlib.util

    entry = module
    try:
        if importlib.util.find_spec(module).submodule_search_locations is not None:
            entry = f"{module}.__main__"
        importlib.import_module(entry)
    except BaseException:  # noqa: BLE001 - the child runs it again and shows the error
        pass
    sys.modules.pop(entry, None)


def _child(job: dict, out_path: str, err_path: str | None = None) -> None:
    import logging
    import runpy
    import traceback

    os.setpgid(0, 0)  # its own process group, so a timeout ends what it started too
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if err_path else out
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    script = job.get("script")
    sys.argv = [script or job["module"], *job["args"]]
    if script:  # python path/to/script.py: the script's folder comes first on the path
        sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        if job.get("prelude"):
            exec(compile(job["prelude"], "<prelude>", "exec"), {"__name__": "__prelude__"})
        if script:
            runpy.run_path(script, run_name="__main__")
        else:
            # the entry module runs fresh, as in a new interpreter, even when a module warmed
            # after it imported it into the parent again (runpy warns of a module already loaded)
            sys.modules.pop(job["module"], None)
            runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
            code = 1
        else:
            code = exit_.code or 0
    except BaseException:  # what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_all(jobs: list[dict]) -> list[tuple[int, str]]:
    _preload()
    folder = tempfile.mkdtemp(prefix="forked-cli-")
    outputs = [os.path.join(folder, f"{i}.out") for i in range(len(jobs))]
    codes: dict[int, int] = {}
    running: dict[int, int] = {}  # pid -> job index
    todo = list(range(len(jobs)))
    while todo or running:
        while todo and len(running) < MAX_CHILDREN:
            i = todo.pop(0)
            _warm(jobs[i]["module"])
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(jobs[i], outputs[i])
            running[pid] = i
        pid, status = os.wait()
        codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    results = []
    for i, path in enumerate(outputs):
        with open(path, errors="replace") as fh:
            results.append((codes[i], fh.read()))
        os.unlink(path)
    os.rmdir(folder)
    return results


def _read(path: str) -> str:
    with open(path, errors="replace") as fh:
        text = fh.read()
    os.unlink(path)
    return text


def serve() -> None:
    """One job (a JSON line on stdin) at a time, each a forked child; one JSON line back each."""
    _preload()
    folder = tempfile.mkdtemp(prefix="forked-cli-")
    for n, line in enumerate(sys.stdin):
        job = json.loads(line)
        out, err = os.path.join(folder, f"{n}.out"), os.path.join(folder, f"{n}.err")
        _warm(job["module"])
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(job, out, err)
        deadline = time.monotonic() + job.get("timeout", 600)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                code = -signal.SIGKILL
                break
            time.sleep(0.01)
        print(json.dumps([code, _read(out), _read(err)]), flush=True)


class _Server:
    def __init__(self):
        root = Path(__file__).resolve().parent.parent
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.forked_cli", "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=root)
        self.lock = threading.Lock()
        atexit.register(self.close)

    def run(self, job: dict) -> tuple[int, str, str]:
        with self.lock:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError("the forked CLI server died")
        return tuple(json.loads(reply))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


_server: _Server | None = None


def run(argv: list[str], cwd=None, env: dict | None = None, timeout: float = 600, prelude: str = "",
        check: bool = False, capture_output: bool = True, text: bool = True) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout,
    check=check)`` for ``argv = [sys.executable, "-m", module, *args]`` or ``[sys.executable,
    "script.py", *args]``, forked from the warm server."""
    assert capture_output and text, "output is always captured, as text"
    global _server
    if argv[:2] == [sys.executable, "-m"]:
        entry, args = {"module": argv[2]}, argv[3:]
    elif argv[0] == sys.executable and len(argv) > 1 and str(argv[1]).endswith(".py"):
        entry, args = {"module": "", "script": str(argv[1])}, argv[2:]
    else:
        raise ValueError(f"not a python -m or python script.py command: {argv[:3]}")
    if _server is None or _server.proc.poll() is not None:
        _server = _Server()
    job = {**entry, "args": [str(a) for a in args], "cwd": str(cwd or os.getcwd()),
           "env": dict(env if env is not None else os.environ), "timeout": timeout, "prelude": prelude}
    code, out, err = _server.run(job)
    if code == -signal.SIGKILL and timeout:
        raise subprocess.TimeoutExpired(argv, timeout, out, err)
    if check and code != 0:
        raise subprocess.CalledProcessError(code, argv, out, err)
    return subprocess.CompletedProcess(argv, code, out, err)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        json.dump(run_all(json.load(sys.stdin)), sys.stdout)
