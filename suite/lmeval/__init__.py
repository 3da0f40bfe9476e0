"""PosBench in lm-evaluation-harness: the ``posbench`` model (a stored run), the ``posbench_*``
tasks and groups (YAMLs generated from the task registry and task sets by ``suite.lmeval.yamls``
into ``include_dir()``), and ``python -m suite.lmeval`` (lm-eval's CLI with both registered).
Importing this package registers the model.
"""
from suite.lmeval.model import PosBenchEvalLM, load_run, model_spec_from_dict, resolve_run
from suite.lmeval.yamls import include_dir

__all__ = ["PosBenchEvalLM", "include_dir", "load_run", "model_spec_from_dict", "resolve_run"]
