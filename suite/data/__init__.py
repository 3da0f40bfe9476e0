"""Data: batches of task examples, their lengths and the answer-span loss, read by training and
evaluation alike (neither imports the other)."""
