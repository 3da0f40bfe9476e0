"""Every ``posbench <command> --help``: it names ``posbench <command>``, describes every option in
plain text, and answers without loading what only the work needs (torch, scipy, matplotlib; for
``run``, Hydra too). ``posbench run``'s help and tab completion come from the schema's snapshot
(``suite.config.store_snapshot``: the committed seed while current, else the cache the first call
rebuilds), and say what the full path says.

Mutation checks: ``commandline.plain`` returning its text unchanged makes
test_every_help_names_posbench_and_describes_every_option fail (summary's ``config_hash``), as does
show's ``--seed`` without its help; ``import torch`` back at the top of suite/commands/diagnose.py,
or ``from suite.report import boards, render`` back at the top of suite/report/__main__.py, makes
test_help_loads_no_heavy_module fail; ``help_text`` ignoring the args (serving the bare help for
``position=alibi --help``) makes test_run_help_and_completion_from_the_snapshot_equal_the_full_paths
fail; ``current`` skipping its digest check makes test_a_stale_snapshot_is_rebuilt_once_and_cached fail.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite import cli
from suite.config import store_snapshot

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "scipy", "matplotlib", "lm_eval")


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)


def _help_and_modules(command: str) -> tuple[str, list[str]]:
    """(the help ``posbench <command> --help`` prints, the heavy modules it loaded), in a fresh interpreter."""
    code = (f"import json, sys\nfrom suite import cli\ntry:\n    cli.main([{command!r}, '--help'])\nexcept SystemExit:\n"
            f"    pass\nprint('\\x00' + json.dumps([m for m in {HEAVY + ('hydra',)!r} if m in sys.modules]))")
    out = _python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    text, modules = out.stdout.rsplit("\x00", 1)
    return text, json.loads(modules)


def undescribed_options(text: str) -> list[str]:
    """The option lines of a help text (two spaces, then a flag) that carry no description on their
    line or on the more deeply indented line after it; Hydra's sections (``== ... ==``, the
    composed config with its YAML lists) are not options."""
    lines = text.split("\n== ", 1)[0].splitlines()
    bare = []
    for i, line in enumerate(lines):
        if not re.match(r"^  --?[A-Za-z]", line):
            continue
        if re.match(r"^  \S.*?\S {2,}\S", line):  # option, two or more spaces, its description
            continue
        after = lines[i + 1] if i + 1 < len(lines) else ""
        if re.match(r"^ {4,}\S", after) and not re.match(r"^ {2,}-", after):
            continue
        bare.append(line.strip())
    return bare


@pytest.fixture(scope="module")
def helps():
    warm = _python("from suite.config import store_snapshot\nstore_snapshot.help_text(['--help'])")
    assert warm.returncode == 0, warm.stderr[-2000:]  # a stale seed is rebuilt into the cache, help text included
    return {command: _help_and_modules(command) for command in cli.COMMANDS}


def test_every_help_names_posbench_and_describes_every_option(helps):
    assert set(helps) == set(cli.COMMANDS) and "reproduce" in helps
    for command, (text, _) in helps.items():
        assert text.startswith(f"usage: posbench {command} "), (command, text[:200])
        assert "``" not in text, (command, text[text.index("``") - 80: text.index("``") + 80])
        assert "python -m" not in text.split("\n\n", 1)[0], (command, text[:300])  # the usage names posbench
        options = [line for line in text.splitlines() if re.match(r"^  --?[A-Za-z]", line)]
        assert len(options) >= 2, (command, text)  # -h and at least one of its own
        assert undescribed_options(text) == [], (command, undescribed_options(text))


def test_the_option_check_finds_an_option_without_a_description():
    text = "options:\n  -h, --help  show this help message and exit\n  --seed SEED\n  --json\n  --out OUT   where\n"
    assert undescribed_options(text) == ["--seed SEED", "--json"]
    assert undescribed_options("  --threshold THRESHOLD\n                        the bound\n") == []


def test_help_loads_no_heavy_module(helps):
    loaded = {command: modules for command, (_, modules) in helps.items() if modules}
    assert loaded == {}  # run's help is the stored text: not even Hydra loads


def test_reproduce_is_a_posbench_command(capsys):
    assert cli.COMMANDS["reproduce"][0] == "suite.reproduce"
    assert cli.main(["reproduce", "nosuch", "--published", str(ROOT / "published")]) == 1
    assert "no shipped file" in capsys.readouterr().err


def _completions(line: str, full: bool) -> tuple[list[str], list[str]]:
    """(the words bash completion offers for ``line``, the heavy modules loaded), through the console
    script's path (the snapshot) or through ``suite.run`` itself (``full``)."""
    if full:
        call = "from suite.run import main\nsys.argv = ['posbench', '-sc', 'query=bash']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        line = re.sub(r"^posbench run", "posbench", line)
    else:
        call = "from suite import cli\ntry:\n    cli.main(['-sc', 'query=bash'])\nexcept SystemExit:\n    pass\n"
    code = f"import json, sys\n{call}print('\\x00' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = _python(code, {"COMP_LINE": line, "COMP_POINT": str(len(line))})
    assert out.returncode == 0, out.stderr[-2000:]
    words, modules = out.stdout.rsplit("\x00", 1)
    return words.split(), json.loads(modules)


@pytest.mark.exhaustive  # 25 s of two full Hydra paths; test_the_snapshot_is_current guards make test
def test_run_help_and_completion_from_the_snapshot_equal_the_full_paths():
    assert store_snapshot.refreshed() is not None
    for line in ("posbench run position=al", "posbench run position=alibi position.", "posbench run span=swa span.w",
                 "posbench run tra", "posbench run taskset=", "posbench run "):
        fast, heavy = _completions(line, full=False)
        assert heavy == [], (line, heavy)
        assert fast and fast == _completions(line, full=True)[0], line
    for args in (["--help"], ["position=alibi", "span=swa", "--help"]):
        code = "from suite import cli\ntry:\n    cli.main(['run', *{!r}])\nexcept SystemExit:\n    pass\n"
        fast = _python(code.format(args))
        full = subprocess.run([sys.executable, "-m", "suite.run", *args], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        assert fast.returncode == full.returncode == 0 and fast.stdout == full.stdout, args
    assert "name: alibi" in fast.stdout and "window: 16" in fast.stdout


def test_the_snapshot_holds_the_live_schema():
    """The snapshot help and completion read (the committed seed while current, else the cache
    ``refreshed`` builds) holds the nodes and tasks the live schema registers now: no
    ``make store-snapshot`` is needed after an edit to the schema, a scheme, a task or a YAML."""
    snap = store_snapshot.refreshed()
    assert snap is not None and store_snapshot.current() is not None
    live = json.loads(json.dumps(store_snapshot._schema_nodes()))
    assert {key: snap[key] for key in store_snapshot.NODES} == live


def _in_fresh_python_over(conf: Path, cache: Path, seed: Path, call: str, env: dict | None = None) -> dict:
    """Run ``call`` in a fresh interpreter whose ``store_snapshot`` reads ``conf``, ``cache`` and
    ``seed``; what it printed, whether ``build`` ran and whether torch loaded."""
    code = (f"import sys\nfrom pathlib import Path\nfrom suite.config import store_snapshot as s\n"
            f"s.CONF_DIR, s.CACHE, s.SNAPSHOT = Path({str(conf)!r}), Path({str(cache)!r}), Path({str(seed)!r})\n"
            f"built = []\nbuild = s.build\ns.build = lambda: built.append(1) or build()\n"
            f"from suite import cli\ntry:\n    {call}\nexcept SystemExit:\n    pass\n"
            f"print('\\x00' + str(bool(built)) + ' ' + str('torch' in sys.modules))")
    out = _python(code, env)
    assert out.returncode == 0, out.stderr[-2000:]
    text, flags = out.stdout.rsplit("\x00", 1)
    built, torch = flags.split()
    return {"out": text, "built": built == "True", "torch": torch == "True"}


def test_a_stale_snapshot_is_rebuilt_once_and_cached(tmp_path):
    """A new scheme YAML makes the stored snapshot stale: the first ``posbench run --help`` builds
    the snapshot from the live schema and caches it; the next help and a completion in fresh
    processes read the cache (no build, no torch) and offer the new scheme.
    Mutation checks: ``current`` skipping its digest check (the stale seed served) makes this fail;
    ``keep`` writing nothing (every call rebuilding) makes it fail."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    (conf / "position" / "alibi_copy.yaml").write_text((conf / "position" / "alibi.yaml").read_text())
    seed, cache = tmp_path / "seed.json", tmp_path / "cache" / "snap.json"
    shutil.copy(store_snapshot.SNAPSHOT, seed)
    first = _in_fresh_python_over(conf, cache, seed, "cli.main(['run', '--help'])")
    assert first["built"] and cache.is_file() and "alibi_copy" in first["out"].split("position: ", 1)[1].split("\n")[0]
    second = _in_fresh_python_over(conf, cache, seed, "cli.main(['run', '--help'])")
    assert second == {"out": first["out"], "built": False, "torch": False}
    line = "posbench run position=alibi_c"
    completed = _in_fresh_python_over(conf, cache, seed, "cli.main(['-sc', 'query=bash'])",
                                      {"COMP_LINE": line, "COMP_POINT": str(len(line))})
    assert completed == {"out": "position=alibi_copy\n", "built": False, "torch": False}
