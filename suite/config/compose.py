"""Compose PosBench's Hydra config outside ``@hydra.main`` (for tools and tests)."""
from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from suite.config import schema

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """The config ``python -m suite.run <overrides>`` would run with."""
    schema.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides or []))
