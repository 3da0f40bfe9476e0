"""Configuration: the typed schema, Hydra composition, and the build from a composed config to a
frozen, validated, hashed run spec (with its code digest and resource checks)."""
