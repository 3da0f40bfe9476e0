"""The folder of task YAMLs an lm-eval call writes (``suite.lmeval.yamls.include_dir``) is removed
when the call ends, and when the process that wrote it exits, so no ``posbench-lmeval-*`` folder
is left behind in the temporary folder.

Mutation checks: ``suite.lmeval.__main__.main`` without its ``finally`` (no ``remove_include_dir``)
makes test_an_lmeval_call_removes_its_yaml_folder fail; ``include_dir`` back on
``tempfile.mkdtemp`` (no finalizer) makes test_a_process_that_wrote_the_folder_removes_it_when_it_exits fail.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from suite.lmeval import yamls
from suite.lmeval.__main__ import main as lmeval_main

ROOT = Path(__file__).resolve().parent.parent


def test_an_lmeval_call_removes_its_yaml_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yamls.remove_include_dir()  # a folder an earlier test of this process wrote elsewhere
    written = []
    real_write = yamls.write
    monkeypatch.setattr(yamls, "write", lambda folder: written.append(real_write(folder)) or written[-1])
    with pytest.raises(SystemExit) as exit_info:  # an unknown PosBench task: refused after the YAMLs are written
        lmeval_main(["--model", "dummy", "--tasks", "posbench_nosuch"])
    assert exit_info.value.code == 2 and "unknown PosBench task(s) posbench_nosuch" in capsys.readouterr().err
    assert len(written) == 1 and written[0].parent == tmp_path and written[0].name.startswith("posbench-lmeval-")
    assert not written[0].exists() and list(tmp_path.iterdir()) == []
    # the next call writes a fresh folder, not the removed one
    assert yamls.include_dir() != written[0] and (yamls.include_dir() / "posbench_copy.yaml").is_file()
    yamls.remove_include_dir()
    assert list(tmp_path.iterdir()) == []


def test_a_process_that_wrote_the_folder_removes_it_when_it_exits(tmp_path):
    code = "from suite.lmeval.yamls import include_dir; print(include_dir())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    folder = Path(out.stdout.split()[-1])
    assert folder.parent == tmp_path and folder.name.startswith("posbench-lmeval-")
    assert not folder.exists() and list(tmp_path.iterdir()) == []
