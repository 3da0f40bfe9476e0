"""What a command that reads a config does before its own work (``describe``, ``diagnose``): take
Hydra overrides in any order with its own flags, compose them, build and check the run spec for
any machine (``suite.config.preflight`` with ``here=False``), and refuse a configuration that
does not compose, validate or fit with exit code 2 and the reason.

Hydra, torch and the config code are imported by ``configured``, not here, so a command's
``--help`` answers before they load."""
from __future__ import annotations

import argparse

from suite.commandline import Refused, parser


def overrides_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A command's parser (``suite.commandline.parser``) that takes Hydra overrides."""
    p = parser(prog, doc)
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for posbench run (pattern=rnope)")
    return p


def configured(overrides: list[str], doing: str, runs_model: bool = False):
    """(composed config, checked run spec) of ``overrides``; ``Refused`` (exit 2) when they do not
    compose or validate ("bad configuration"), or when the run cannot fit ("cannot <doing> here").
    ``runs_model``: the command builds the model and runs it forward on this machine's CPU
    (``diagnose``), so its weights and an evaluation forward must fit this machine's memory
    (``check_memory`` of the evaluation phase) before a tensor is allocated."""
    import torch
    from hydra.errors import HydraException

    from suite.config.build import SpecError
    from suite.config.compose import compose_config
    from suite.config.preflight import preflight
    from suite.config.resources import ResourceError, check_memory

    try:
        cfg = compose_config(overrides)
        spec, _ = preflight(cfg, here=False)
        if runs_model:
            check_memory(spec, device=torch.device("cpu"), phases=("eval",))
    except (SpecError, HydraException) as err:
        raise Refused(f"bad configuration: {err}") from None
    except ResourceError as err:
        raise Refused(f"cannot {doing} here: {err}") from None
    return cfg, spec
