import warnings

import pytest

from suite.config import compose_config
from suite.spec import build

warnings.filterwarnings("ignore", message=".*flex_attention.*")


def make_spec(*overrides):
    """The run spec ``python -m suite.run <overrides>`` would build."""
    return build(compose_config(list(overrides)))


@pytest.fixture
def spec_of():
    return make_spec
