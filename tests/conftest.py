import warnings

import pytest
import torch

from suite.config import compose_config
from suite.spec import build

warnings.filterwarnings("ignore", message=".*flex_attention.*")


def make_spec(*overrides):
    """The run spec ``python -m suite.run <overrides>`` would build."""
    return build(compose_config(list(overrides)))


@pytest.fixture
def spec_of():
    return make_spec


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread while a module's tests run."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
