"""Adding a scheme takes two files and breaks no test: in a copy of the checkout with ALiBi at half
its slopes added (one Python file, one YAML; tests/test_rank.py ranks the same scheme), make
test's fast subset passes, and its grids of every scheme hold cases of the new one.

It runs make test's whole fast subset again, so it belongs to make test-exhaustive (CI runs both).

Mutation check: a test that lists the schemes by hand (``assert sorted(SCHEMES) == [...]``) makes
this fail, as does a store snapshot that does not refresh itself when a scheme is added.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.test_rank import SCHEME

ROOT = Path(__file__).resolve().parent.parent


def _checkout_files() -> list[str]:
    """The files a clone of this checkout holds, with what is not committed yet (never what git ignores)."""
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
        return [f for f in out.stdout.split("\0") if f and (ROOT / f).is_file()]
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
            if p.is_file() and not {".venv", ".git", "__pycache__", "results", "outputs", "wandb"} & set(p.parts)]


@pytest.mark.exhaustive
def test_a_new_scheme_passes_the_fast_subset_in_a_copy_of_the_checkout(tmp_path):
    repo = tmp_path / "repo"
    for name in _checkout_files():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    if (ROOT / ".cache" / "corpora").is_dir():  # the prose corpus make install fetched (not the snapshot cache)
        (repo / ".cache").mkdir()
        (repo / ".cache" / "corpora").symlink_to(ROOT / ".cache" / "corpora")
    (repo / "suite" / "model" / "position" / "alibi_half.py").write_text(SCHEME)
    (repo / "conf" / "position" / "alibi_half.yaml").write_text(
        "defaults:\n  - /scheme_defaults/alibi_half@_here_\n  - _self_\nname: alibi_half\n")

    report = tmp_path / "fast.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "2", "--dist", "worksteal", "-m", "not exhaustive",
                           "-p", "no:cacheprovider", f"--junitxml={report}", "tests"],
                          cwd=repo, capture_output=True, text=True, timeout=1500, env=env)
    assert done.returncode == 0, done.stdout[-4000:]
    cases = [case.get("name", "") for case in ET.parse(report).getroot().iter("testcase")]
    new = [name for name in cases if "alibi_half" in name]
    assert len(cases) > 1000 and any(name.startswith("test_every_path_equals_the_reference[alibi_half") for name in new), \
        (len(cases), new)  # make test checks every scheme against its reference; the other grids run it exhaustively
