"""Inspection commands: ``describe`` (the layers a config builds), ``diagnose`` (recency gaps per
layer), ``show`` (one example of a task) and ``curve`` (a run's or a cell's learning curves). Each is ``python -m suite.commands.<name>`` and
``posbench <name>`` (``suite/cli.py``)."""
