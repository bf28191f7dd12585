"""onemodel.data: the name under which onemodel.utils.data (torch.utils.data's counterpart,
see its modules) was first published; this module is that package."""
import sys

from .utils import data as _package
from .utils.data import *  # noqa: F401,F403  (the names, for readers and type checkers)

sys.modules[__name__] = _package
