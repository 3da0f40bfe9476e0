"""The schema's Hydra ConfigStore entries as plain data, so ``posbench run --help`` and tab
completion run Hydra over ``conf/`` without importing torch.

``suite.config.schema.register`` stores nodes built from the spec dataclasses and from every
position scheme's ``Config``, found by importing the model code (torch and every scheme: 3 to 10 s
of a help or a TAB press). Help and completion read only those nodes' keys and values, so a
snapshot of them serves: each node as a container (``entries``, with ``none_nodes``: the keys
whose None stands for a config node), the task names the ``${posbench.tasks:}`` resolver lists,
``sources``: the project files the nodes are made from (every project module the schema's import
loaded, the module files of the piece folders, so a new scheme or task counts, and the YAMLs under
``conf/``) with their digest, and ``help``: the text ``posbench run --help`` prints, as Hydra
writes it.

A snapshot is used only while that digest matches the checkout (``current``). Two files may hold
one: ``store_snapshot.json`` beside this file, committed, a seed that makes a fresh clone fast
(``make store-snapshot``, ``python -m suite.config.store_snapshot``, rewrites it), and ``CACHE``
(``.cache/store_snapshot.json``, git-ignored). When neither is current (a scheme, a task, the
schema or a conf/ YAML changed), the first help or completion call builds the snapshot from the
live schema in its own process (``refreshed``: the torch import once, no second interpreter) and
writes it to ``CACHE`` atomically, the help text too once a bare ``--help`` has been answered
(``help_text``), so every later call is fast again; nothing needs rerunning by hand.
``tests/test_cli_help.py`` holds a current snapshot to the live schema. Runs, ``--cfg`` and every
other Hydra call use the typed schema itself (``suite.run``). Hydra, OmegaConf, the standard
library, ``suite.files`` and ``suite.registry`` only, until a snapshot has to be built.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

from suite import files as io_files
from suite.registry import package_modules

ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = ROOT / "conf"  # as suite.config.compose.CONF_DIR, which imports the schema
SNAPSHOT = Path(__file__).with_name("store_snapshot.json")  # the committed seed
CACHE = ROOT / ".cache" / "store_snapshot.json"  # built here when the seed is stale; git-ignored
PIECE_FOLDERS = ("suite/model/position", "suite/model/span", "suite/model/mixer", "tasks")
SCHEMA_ENTRY = "posbench_schema"
SCHEME_GROUP = "scheme_defaults"  # as suite.config.schema.SCHEME_DEFAULTS
RESOLVER = "posbench.tasks"
HELP_FLAGS = ("-h", "--help", "--hydra-help")
COMPLETION_FLAGS = ("-sc", "--shell-completion")
NODES = ("tasks", "entries", "none_nodes")  # what Hydra reads of a snapshot


def digest(files: list[str]) -> str:
    """sha256 over ``files`` (paths relative to the checkout: their names and bytes, a missing file
    as missing), every config YAML under ``CONF_DIR`` (the help text shows them; named relative to
    it) and the module files of every piece folder (``suite.registry.package_modules``)."""
    h = hashlib.sha256()
    named = {rel: ROOT / rel for rel in files}
    named |= {f"conf/{p.relative_to(CONF_DIR)}": p for p in CONF_DIR.rglob("*.yaml")}
    for rel in sorted(named):
        path = named[rel]
        h.update(rel.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<missing>") + b"\0")
    for folder in PIECE_FOLDERS:
        h.update(" ".join(str(p.relative_to(ROOT)) for p in package_modules(ROOT / folder)).encode() + b"\0")
    return h.hexdigest()


def _project_files(paths) -> list[str]:
    """The files of ``paths`` under suite/ or tasks/ of this checkout, relative to it and sorted."""
    resolved = [Path(p).resolve() for p in paths]
    return sorted({str(p.relative_to(ROOT)) for p in resolved
                   if p.is_relative_to(ROOT / "suite") or p.is_relative_to(ROOT / "tasks")})


def source_files() -> list[str]:
    """The project files a fresh interpreter imports to register the schema (relative paths): the
    ones the snapshot is made from. A fresh interpreter, so the answer does not depend on what the
    caller imported before."""
    code = ("import json, sys\nfrom suite.config import schema\nschema.register()\n"
            "print(json.dumps([m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)]))")
    return _project_files(json.loads(_run_in_fresh_python(["-c", code]).splitlines()[-1]))


def _loaded_files() -> list[str]:
    """The project files this process has imported: a superset of what the schema is made from
    (``source_files``), so a snapshot built here is held stale by every edit that could change it."""
    return _project_files(m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None))


def _none_nodes(node, prefix: str = "") -> list[str]:
    """The dotted keys of ``node`` whose value is None but whose type is a config node (the schema's
    ``taskset: Optional[TasksetConf] = None``): completion offers ``taskset.`` for such a key, and a
    plain container would hold a bare None."""
    from omegaconf import DictConfig

    found = []
    for key in node.keys():
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            found += [f"{prefix}{key}"] if child._is_none() else _none_nodes(child, f"{prefix}{key}.")
    return found


def _run_in_fresh_python(args: list[str]) -> str:
    """The stdout of ``python <args>`` in a fresh interpreter over this checkout."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("COMP_LINE", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout


def _schema_nodes() -> dict:
    """``NODES`` of the live schema: each ConfigStore node ``schema.register`` stores (imports torch
    and every piece), its none-nodes and the registered tasks."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from suite.config import schema
    from tasks import TASKS

    schema.register()
    store = ConfigStore.instance()

    def node(path: str):
        return OmegaConf.to_container(store.load(f"{path}.yaml").node, resolve=False)

    entries = {SCHEMA_ENTRY: node(SCHEMA_ENTRY)}
    for name in sorted(store.list(SCHEME_GROUP)):
        stem = name.removesuffix(".yaml")
        entries[f"{SCHEME_GROUP}/{stem}"] = node(f"{SCHEME_GROUP}/{stem}")
    none_nodes = {SCHEMA_ENTRY: _none_nodes(store.load(f"{SCHEMA_ENTRY}.yaml").node)}
    return {"tasks": sorted(TASKS), "entries": entries, "none_nodes": none_nodes}


def live() -> dict:
    """The snapshot of this checkout's schema, from the schema itself (imports torch), its sources
    and help text from fresh interpreters: what the committed seed holds."""
    nodes = _schema_nodes()
    files = source_files()
    return {"sources": {"files": files, "digest": digest(files)}, **nodes,
            "help": _run_in_fresh_python(["-m", "suite.run", "--help"])}


def build() -> dict:
    """The snapshot of this checkout's schema built in this process (imports torch), its sources
    the project files this process has loaded (``_loaded_files``), without a help text."""
    nodes = _schema_nodes()
    files = _loaded_files()
    return {"sources": {"files": files, "digest": digest(files)}, **nodes}


def read(path: Path | None = None) -> dict | None:
    """The snapshot stored at ``path`` (default: the committed seed), or None when there is none or
    it does not parse."""
    try:
        return json.loads((SNAPSHOT if path is None else path).read_text())
    except (OSError, ValueError):
        return None


def _is_current(snap) -> bool:
    """Whether ``snap`` was made from the files as they are now (``digest``)."""
    try:
        return digest(snap["sources"]["files"]) == snap["sources"]["digest"]
    except (TypeError, KeyError):
        return False


def current() -> dict | None:
    """The stored snapshot made from the files as they are now: the cache's, else the seed's, else
    None."""
    for path in (CACHE, SNAPSHOT):
        if _is_current(snap := read(path)):
            return snap
    return None


def keep(snap: dict) -> None:
    """Write ``snap`` to ``CACHE`` atomically (``suite.files.write_atomic``: a parallel reader sees
    the old file or the new one); a checkout where it cannot be written just stays on the slow path."""
    with contextlib.suppress(OSError):
        io_files.write_atomic(CACHE, json.dumps(snap, indent=1) + "\n")


def refreshed() -> dict | None:
    """The current snapshot; when none is, one built from the live schema here (``build``) and kept
    in ``CACHE`` for the calls after this one. None when the schema cannot be built (a scheme that
    fails to import): the caller's full path (``suite.run``) then reports why."""
    snap = current()
    if snap is not None:
        return snap
    try:
        snap = build()
    except Exception:  # noqa: BLE001 - the full path raises it again, with its own report
        return None
    keep(snap)
    return snap


def register(snap: dict) -> None:
    """Put the snapshot's nodes in Hydra's ConfigStore and its task list behind the resolver, as
    ``suite.config.schema.register`` puts the typed ones."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import DictConfig, OmegaConf

    store = ConfigStore.instance()
    for path, node in snap["entries"].items():
        node = OmegaConf.create(node)
        for key in snap.get("none_nodes", {}).get(path, []):
            parent, _, last = key.rpartition(".")
            setattr(OmegaConf.select(node, parent) if parent else node, last, DictConfig(None))
        group, _, name = path.rpartition("/")
        store.store(group=group or None, name=name, node=node)
    tasks = list(snap["tasks"])
    OmegaConf.register_new_resolver(RESOLVER, lambda: list(tasks), replace=True)


def _entry(snap: dict):
    """Hydra's entry over ``conf/`` with ``snap`` registered. Its task function never runs: Hydra
    answers --help, --hydra-help and -sc before it would."""
    import hydra

    register(snap)

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def answer(cfg) -> None:
        raise RuntimeError("the config snapshot serves help and completion only; a run takes suite.run")

    return answer


def _hydra_help(snap: dict) -> str:
    """What Hydra prints for ``posbench run --help`` over ``snap``, captured."""
    out, argv = io.StringIO(), sys.argv
    sys.argv = ["posbench", "--help"]
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            _entry(snap)()
    finally:
        sys.argv = argv
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()  # as a fresh process has it, for a caller that runs Hydra next
    return out.getvalue()


def help_text(args: list[str]) -> str | None:
    """The text of ``posbench run --help`` when ``args`` ask for exactly that (no override, which
    would change the config it shows): the current snapshot's, else Hydra's over the snapshot
    ``refreshed`` builds, then kept with it in ``CACHE``, so the next call prints it without even
    importing Hydra. None for any other ``args``, or when no snapshot can be built."""
    if args not in (["--help"], ["-h"]):
        return None
    snap = refreshed()
    if snap is None:
        return None
    if snap.get("help") is None:
        snap = {**snap, "help": _hydra_help(snap)}
        keep(snap)
    return snap["help"]


def asks_help_or_completion(args: list[str], completing: bool) -> bool:
    """Whether a ``posbench run`` call only prints help or completes a line (``completing``: the
    shell's ``COMP_LINE`` is set), the calls the snapshot serves."""
    return completing or any(a in HELP_FLAGS or a in COMPLETION_FLAGS or a.split("=", 1)[0] in COMPLETION_FLAGS
                             for a in args)


def hydra_main():
    """Hydra's entry over ``conf/`` with the snapshot registered (``refreshed``: rebuilt and cached
    first when the stored ones are stale), for help and completion; None when no snapshot can be
    built (the caller then takes ``suite.run.main``)."""
    snap = refreshed()
    return None if snap is None else _entry(snap)


def main(argv: list[str] | None = None) -> int:
    """``python -m suite.config.store_snapshot [--check]``: write the committed seed from the live
    schema (or, with --check, exit 1 when the seed differs from it). Nothing needs it to run: a
    stale seed is replaced by ``CACHE`` on the first help or completion call."""
    args = sys.argv[1:] if argv is None else argv
    snap = live()
    if args == ["--check"]:
        same = read() == json.loads(json.dumps(snap))
        print(f"{SNAPSHOT}: {'current' if same else 'stale (help builds .cache/store_snapshot.json meanwhile): make store-snapshot rewrites it'}")
        return 0 if same else 1
    SNAPSHOT.write_text(json.dumps(snap, indent=1) + "\n")
    print(f"wrote {SNAPSHOT} ({len(snap['entries'])} nodes, {len(snap['sources']['files'])} source files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
