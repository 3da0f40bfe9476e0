"""PosBench: a benchmark suite and leaderboard for positional encoding in decoder-only transformers."""
