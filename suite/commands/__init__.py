"""Inspection commands: ``describe`` (the layers a config builds), ``diagnose`` (recency gaps per
layer) and ``show`` (one example of a task). Each is ``python -m suite.commands.<name>`` and
``posbench <name>`` (``suite/cli.py``)."""
