"""The ``posbench`` console script: every subcommand has --help and maps onto its module, nothing
to show exits non-zero, and ``posbench run`` completes Hydra overrides in bash.

Mutation check: in suite/cli.py _run, leaving ``run`` in COMP_LINE makes
test_run_completes_hydra_overrides_through_the_console_script fail; bash completion of the first
word and of other subcommands' arguments: test_bash_completes_subcommands_then_paths_then_hydra_overrides."""
import os
import shlex
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from suite import cli, commandline

ROOT = Path(__file__).resolve().parent.parent
ARGPARSE = ["report", "summary", "describe", "diagnose", "show", "lmeval", "compare", "reproduce", "export"]


def test_the_console_script_is_declared_with_every_subcommand():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"posbench": "suite.cli:main"}
    assert list(cli.COMMANDS) == ["run", "report", "summary", "describe", "diagnose", "show", "lmeval", "compare",
                                  "curve", "reproduce", "rank", "export"]


@pytest.mark.parametrize("command", ARGPARSE)
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and out.startswith(f"usage: posbench {command} ") and "-h, --help" in out


def test_no_command_or_an_unknown_one_exits_2_naming_the_choices(capsys):
    assert cli.main([]) == 2 and "commands:" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0 and "compare" in capsys.readouterr().out
    assert cli.main(["sumary"]) == 2
    assert "unknown command 'sumary'; valid: run, report, summary" in capsys.readouterr().err


def test_nothing_to_show_exits_non_zero(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["summary", str(tmp_path / "empty")]) == 1
    assert cli.main(["report", "none", "--results", str(tmp_path), "--from", "results"]) == 1
    assert cli.main(["compare", str(tmp_path / "empty"), str(tmp_path / "empty")]) == 1
    assert cli.main(["describe", "position=nosuch"]) == 2
    assert "no results under" in capsys.readouterr().err


def test_the_python_m_forms_print_help_not_an_error():
    for module in ("suite.results.shipped", "suite.commands.describe", "suite.commands.diagnose",
                   "suite.commands.show", "suite.report.summary", "suite.report.compare"):
        out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.startswith(f"usage: python -m {module} "), (module, out.stderr[-500:])


def test_describe_takes_overrides_and_json_in_any_order(capsys):
    assert cli.main(["describe", "--json", "pattern=rnope", "model.n_layers=2"]) == 0
    assert '"position": "nope"' in capsys.readouterr().out


def _posbench():
    path = Path(sys.executable).parent / "posbench"
    if not path.exists():
        pytest.skip("posbench is not installed in this environment (pip install -e .)")
    return str(path)


def _schemes_starting_with(prefix: str) -> list[str]:
    """The registered position schemes whose name starts with ``prefix``, as completion offers them."""
    from suite.model.position import SCHEMES

    return sorted(f"position={name}" for name in SCHEMES if name.startswith(prefix))


def test_run_completes_hydra_overrides_through_the_console_script():
    exe = _posbench()
    line = "posbench run position=a"
    env = {**os.environ, "COMP_LINE": line, "COMP_POINT": str(len(line)), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([exe, "-sc", "query=bash"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and sorted(out.stdout.split()) == _schemes_starting_with("a"), out.stderr[-1000:]
    assert "position=alibi" in out.stdout.split()
    install = subprocess.run([exe, "run", "-sc", "install=bash"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "complete -o nospace -o default -F hydra_bash_completion posbench" in install.stdout


def _bash_completes(line: str, cwd: Path = ROOT) -> tuple[list[str], str]:
    """(COMPREPLY, stderr) of the installed completion function for ``line`` with the cursor at its
    end, as bash calls it on TAB: ``COMP_LINE``, ``COMP_POINT``, ``COMP_WORDS`` and ``COMP_CWORD``
    set, ``posbench`` found on PATH."""
    exe = _posbench()
    words = line.split() + ([""] if line.endswith(" ") else [])
    script = ('eval "$(posbench run -sc install=bash)"\n'
              f"COMP_LINE={shlex.quote(line)}; COMP_POINT={len(line)}\n"
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
              'hydra_bash_completion\nprintf "%s\\n" "${COMPREPLY[@]}"\n')
    env = {**os.environ, "PATH": f"{Path(exe).parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    env.pop("COMP_LINE", None)
    out = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1000:]
    return [w for w in out.stdout.splitlines() if w], out.stderr


def test_bash_completes_subcommands_then_paths_then_hydra_overrides(tmp_path):
    """With the completion installed, the first word completes to the subcommands it starts
    (``posbench re`` offers report and reproduce), a later word of a subcommand other than ``run``
    to nothing, so bash's ``-o default`` offers file paths (no Hydra error), and the overrides after
    ``run`` through Hydra.
    Mutation checks: ``completions`` matching the whole name instead of its start, or returning
    None (Hydra) after every subcommand, makes this fail."""
    offered, err = _bash_completes("posbench re")
    assert offered == [name for name in cli.COMMANDS if name.startswith("re")] == ["report", "reproduce"], err
    assert _bash_completes("posbench ")[0] == list(cli.COMMANDS)
    (tmp_path / "results_a").mkdir()
    (tmp_path / "resume.txt").write_text("")
    assert sorted(_bash_completes("posbench summary res", tmp_path)[0]) == ["results_a", "resume.txt"]
    assert sorted(_bash_completes("posbench compare results_a res", tmp_path)[0]) == ["results_a", "resume.txt"]
    assert _bash_completes("posbench summary res", tmp_path)[1] == ""  # no Hydra parse error
    offered, err = _bash_completes("posbench run position=a")
    assert sorted(offered) == _schemes_starting_with("a") and "position=alibi" in offered, err
    assert cli.completions("posbench sum x", "9") == list(cli.COMMANDS)  # the line read up to the cursor
    assert cli.completions("posbench sum x", "11") == ["summary"]


def test_run_help_is_hydras():
    out = subprocess.run([_posbench(), "run", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Powered by Hydra" in out.stdout and "position: " in out.stdout


def test_a_refused_command_prints_its_warnings_and_reason_and_returns_its_code(capsys):
    """``suite.commandline``: a command that refuses returns the refusal's code, with the warnings
    it collected and then its reason on stderr.
    Mutation check: printing the collected warnings after the block instead of in ``finally``
    (so a refusal drops them) makes this fail; ``command`` returning 2 for every refusal makes it fail."""

    @commandline.command
    def main(argv=None, prog="x"):
        with commandline.warnings_on_stderr():
            warnings.warn("skipping results file a.json: truncated")
            raise commandline.Refused("no results under here", 1)

    assert main() == 1
    assert capsys.readouterr().err == "warning: skipping results file a.json: truncated\nno results under here\n"


def test_describe_and_diagnose_refuse_a_bad_config_alike(capsys):
    """Both compose their overrides through ``suite.commands.configured``: exit 2 and the reason."""
    assert cli.main(["describe", "position=nosuch"]) == 2
    assert cli.main(["diagnose", "position=nosuch"]) == 2
    err = capsys.readouterr().err
    first, second = err[: len(err) // 2], err[len(err) // 2:]
    assert first == second and first.startswith("bad configuration: ") and "'position/nosuch'" in first and "\trope\n" in first


def test_every_command_builds_its_parser_and_reads_warnings_through_the_shared_preamble():
    """The command-line preamble is written once (``suite/commandline.py``): no other module of
    suite/ or tasks/ builds an ``ArgumentParser`` or records warnings itself.
    Mutation check: ``argparse.ArgumentParser(prog=prog, ...)`` back in suite/commands/describe.py makes this fail."""
    own = [str(path.relative_to(ROOT)) for folder in ("suite", "tasks") for path in sorted((ROOT / folder).rglob("*.py"))
           if path != ROOT / "suite" / "commandline.py"
           and ("ArgumentParser(" in path.read_text() or "catch_warnings(record=True)" in path.read_text())]
    assert own == []


def test_diagnose_stored_without_a_trained_model_exits_1_naming_the_file(tmp_path, capsys):
    """Nothing to diagnose is exit 1 (not a bad configuration, 2), with the file it looked for.
    Mutation check: ``Refused(...)`` without its code 1 in suite/commands/diagnose.py makes this fail."""
    assert cli.main(["diagnose", "--stored", f"results_dir={tmp_path}", "task=copy"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"no stored model of results_dir={tmp_path} task=copy under {tmp_path}/dev/ (looked for "
                          f"{tmp_path}/dev/_work/") and "/model.pt): " in err
    assert err.rstrip().endswith(f"train it with `posbench run results_dir={tmp_path} task=copy`")
