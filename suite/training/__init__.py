"""Training: the one optimizer step, the loop, checkpoints and DDP."""
