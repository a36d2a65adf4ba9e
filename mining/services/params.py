"""The old import path of the run parameters: they live in `mining.params` now."""

from ..params import *  # noqa: F403
from ..params import __all__ as __all__
