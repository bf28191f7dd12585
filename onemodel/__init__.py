"""onemodel: neural-network training on CPUs with the same bits on every machine."""
__version__ = "0.1.0"

from ._config import (config, get_mode, get_num_threads, mode, set_mode,  # noqa: E402
                      set_num_threads)

__all__ = ["__version__", "config", "get_mode", "get_num_threads", "mode", "set_mode",
           "set_num_threads"]
