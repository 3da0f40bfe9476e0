"""Data: batches of task examples, their lengths and the answer-span loss, read by training and
evaluation alike (neither imports the other), and the metrics an example is scored by, read by
evaluation, the results store, the report and lm-eval (``metrics``: standard library only)."""
