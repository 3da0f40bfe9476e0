"""The schema's Hydra ConfigStore entries as plain data, so ``posbench run --help`` and tab
completion run Hydra over ``conf/`` without importing torch.

``suite.config.schema.register`` stores nodes built from the spec dataclasses and from every
position scheme's ``Config``, found by importing the model code (torch and every scheme: 2 to 3 s
of a help or a TAB press). Help and completion read only those nodes' keys and values, so a
snapshot of them serves: ``store_snapshot.json`` beside this file holds each node as a container
(``entries``, with ``none_nodes``: the keys whose None stands for a config node), the task names
the ``${posbench.tasks:}`` resolver lists, ``sources``: the project files the nodes are made from
(every project module ``register`` imports, the module files of the piece folders, so a new
scheme or task counts, and the YAMLs under ``conf/``) with their digest, and ``help``: the text
``posbench run --help`` prints, as Hydra writes it.

The snapshot is used only while that digest matches the checkout (``current``): after an edit to
any of those files, help and completion take the full path again (slower, never stale) until
``make store-snapshot`` (``python -m suite.config.store_snapshot``) rewrites the file;
``tests/test_cli_help.py`` holds the file to the live schema. Runs, ``--cfg`` and every other
Hydra call use the typed schema itself (``suite.run``). Hydra, OmegaConf, the standard library and
``suite.registry`` only.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from suite.registry import package_modules

ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = ROOT / "conf"  # as suite.config.compose.CONF_DIR, which imports the schema
SNAPSHOT = Path(__file__).with_name("store_snapshot.json")
PIECE_FOLDERS = ("suite/model/position", "suite/model/span", "suite/model/mixer", "tasks")
SCHEMA_ENTRY = "posbench_schema"
SCHEME_GROUP = "scheme_defaults"  # as suite.config.schema.SCHEME_DEFAULTS
RESOLVER = "posbench.tasks"
HELP_FLAGS = ("-h", "--help", "--hydra-help")
COMPLETION_FLAGS = ("-sc", "--shell-completion")


def digest(files: list[str]) -> str:
    """sha256 over ``files`` (paths relative to the checkout: their names and bytes, a missing file
    as missing), every config YAML under ``conf/`` (the help text shows them) and the module files
    of every piece folder (``suite.registry.package_modules``)."""
    h = hashlib.sha256()
    conf = [str(p.relative_to(ROOT)) for p in CONF_DIR.rglob("*.yaml")]
    for rel in sorted({*files, *conf}):
        path = ROOT / rel
        h.update(rel.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<missing>") + b"\0")
    for folder in PIECE_FOLDERS:
        h.update(" ".join(str(p.relative_to(ROOT)) for p in package_modules(ROOT / folder)).encode() + b"\0")
    return h.hexdigest()


def source_files() -> list[str]:
    """The project files a fresh interpreter imports to register the schema (relative paths): the
    ones the snapshot is made from. A fresh interpreter, so the answer does not depend on what the
    caller imported before."""
    code = ("import json, sys\nfrom suite.config import schema\nschema.register()\n"
            "print(json.dumps([m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)]))")
    paths = [Path(f).resolve() for f in json.loads(_run_in_fresh_python(["-c", code]).splitlines()[-1])]
    return sorted(str(p.relative_to(ROOT)) for p in paths
                  if p.is_relative_to(ROOT / "suite") or p.is_relative_to(ROOT / "tasks"))


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


def live() -> dict:
    """The snapshot of this checkout's schema, from the schema itself (imports torch)."""
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
    files = source_files()
    return {"sources": {"files": files, "digest": digest(files)}, "tasks": sorted(TASKS), "entries": entries,
            "none_nodes": none_nodes,
            "help": _run_in_fresh_python(["-m", "suite.run", "--help"])}


def read() -> dict | None:
    """The stored snapshot, or None when there is none or it does not parse."""
    try:
        return json.loads(SNAPSHOT.read_text())
    except (OSError, ValueError):
        return None


def current() -> dict | None:
    """The stored snapshot when it was made from the files as they are now (``digest``), else None."""
    snap = read()
    if not isinstance(snap, dict) or "sources" not in snap:
        return None
    return snap if digest(snap["sources"]["files"]) == snap["sources"]["digest"] else None


def register(snap: dict) -> None:
    """Put the snapshot's nodes in Hydra's ConfigStore and its task list behind the resolver, as
    ``suite.config.schema.register`` puts the typed ones."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from omegaconf import DictConfig

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


def stored_help(args: list[str]) -> str | None:
    """The stored text of ``posbench run --help`` when ``args`` ask for exactly that (no override,
    which would change the config it shows) and the snapshot is current; else None."""
    if args not in (["--help"], ["-h"]):
        return None
    snap = current()
    return None if snap is None else snap.get("help")


def asks_help_or_completion(args: list[str], completing: bool) -> bool:
    """Whether a ``posbench run`` call only prints help or completes a line (``completing``: the
    shell's ``COMP_LINE`` is set), the calls the snapshot serves."""
    return completing or any(a in HELP_FLAGS or a in COMPLETION_FLAGS or a.split("=", 1)[0] in COMPLETION_FLAGS
                             for a in args)


def hydra_main():
    """Hydra's entry over ``conf/`` with the snapshot registered, for help and completion; None when
    the snapshot is not current (the caller then takes ``suite.run.main``). Its task function never
    runs: Hydra answers --help, --hydra-help and -sc before it would."""
    snap = current()
    if snap is None:
        return None
    import hydra

    register(snap)

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def answer(cfg) -> None:
        raise RuntimeError("the config snapshot serves help and completion only; a run takes suite.run")

    return answer


def main(argv: list[str] | None = None) -> int:
    """``python -m suite.config.store_snapshot [--check]``: write the snapshot (or, with --check,
    exit 1 when the stored one differs from the live schema)."""
    args = sys.argv[1:] if argv is None else argv
    snap = live()
    if args == ["--check"]:
        same = read() == json.loads(json.dumps(snap))
        print(f"{SNAPSHOT}: {'current' if same else 'stale: run make store-snapshot'}")
        return 0 if same else 1
    SNAPSHOT.write_text(json.dumps(snap, indent=1) + "\n")
    print(f"wrote {SNAPSHOT} ({len(snap['entries'])} nodes, {len(snap['sources']['files'])} source files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
