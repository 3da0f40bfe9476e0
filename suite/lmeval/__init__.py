"""PosBench in lm-evaluation-harness: the ``posbench`` model (a stored run), the ``posbench_*``
tasks and groups (YAMLs generated from the task registry and task sets by ``suite.lmeval.yamls``
into ``include_dir()``), and ``python -m suite.lmeval`` (lm-eval's CLI with both registered).
The names below load on first use (PEP 562 ``__getattr__``), so ``python -m suite.lmeval --help``
needs neither torch nor lm-eval; using ``PosBenchEvalLM`` (or importing ``suite.lmeval.model``)
registers the model.
"""
from importlib import import_module

_HOMES = {"PosBenchEvalLM": "suite.lmeval.model", "load_run": "suite.lmeval.model",
          "model_spec_from_dict": "suite.lmeval.model", "resolve_run": "suite.lmeval.model",
          "include_dir": "suite.lmeval.yamls"}

__all__ = ["PosBenchEvalLM", "include_dir", "load_run", "model_spec_from_dict", "resolve_run"]


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
