"""Results: a run's identity columns and the store of one JSON file per run."""
