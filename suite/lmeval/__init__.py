"""PosBench in lm-evaluation-harness: the ``posbench`` model (a stored run), the ``posbench_*``
tasks and groups (YAML under ``YAML_DIR``), and ``python -m suite.lmeval`` (lm-eval's CLI with
both registered). Importing this package registers the model.
"""
from pathlib import Path

from suite.lmeval.model import PosBenchEvalLM, load_run, model_spec_from_dict, resolve_run

YAML_DIR = Path(__file__).resolve().parent / "yaml"

__all__ = ["YAML_DIR", "PosBenchEvalLM", "load_run", "model_spec_from_dict", "resolve_run"]
