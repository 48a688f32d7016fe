"""Processes that must not outlive the one that started them."""

import ctypes
import signal
import sys


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so no training runs on unsupervised (a
    training child when its worker dies, a data-parallel helper when its rank 0 does)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
