"""Every check a run passes before it does any work, cheapest first: the schema, shapes, layers
and eval lengths (``build``), then this machine (its device, the attention path's capabilities,
the memory estimate), then the task probes, which generate one example per length. ``results_dir``
is checked as every command checks where it writes (``suite.commandline.output_problem``). A run that
cannot fit in memory is refused by its estimate before a probe builds an example of its length.
"""
from __future__ import annotations

from typing import Optional

import torch
from omegaconf import DictConfig

from suite.config.build import build, check_tasks_fit
from suite.commandline import output_problem
from suite.config.resources import GIB, ResourceError, available_bytes, check_device, check_memory
from suite.config.run_spec import RunSpec

# host memory one probe example holds per token, generously: a Python int in a list, and numpy
# arrays of the same length the generators draw from
PROBE_BYTES_PER_TOKEN = 256


def check_probe_memory(spec: RunSpec, available: Optional[float] = None) -> None:
    """Refuse lengths whose one probe example would not fit in this machine's memory (a task probe
    runs on the host, whatever the run's device)."""
    longest = max([spec.train.seq_len, *spec.eval_lengths])
    need = PROBE_BYTES_PER_TOKEN * longest
    have = available if available is not None else available_bytes(torch.device("cpu"))
    if have is not None and need > have:
        raise ResourceError(f"one example of {longest:,} tokens (train.seq_len={spec.train.seq_len}, eval.multiples up "
                            f"to {max(spec.eval.multiples):g}x) needs about {need / GIB:.1f} GiB of host memory to "
                            f"generate, more than the {have / GIB:.1f} GiB available; lower train.seq_len or eval.multiples")


def preflight(cfg: DictConfig | dict, here: bool = True) -> tuple[RunSpec, Optional[torch.device]]:
    """(spec, device) of a composed config; ``SpecError`` for a bad value, ``ResourceError`` for
    what this machine cannot run. ``here=False`` (a job a cluster node will check itself) skips
    the machine's checks and returns no device."""
    spec = build(cfg, probe_tasks=False)
    # where a run writes, by the rule every command follows; a folder's writability is this machine's
    if (problem := output_problem(cfg.get("results_dir", "results"), probe=here)) is not None:
        raise ResourceError(f"results_dir={str(cfg.get('results_dir'))!r}: {problem}; point results_dir= at a writable folder")
    device = None
    if here:
        device = check_device(spec)
        check_memory(spec, device=device)
    check_probe_memory(spec)
    check_tasks_fit(spec.tasks, spec.train.seq_len, spec.eval.multiples)
    return spec, device
