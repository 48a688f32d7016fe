"""Loading the heavy libraries without the garbage collector walking them as they load."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Importing torch, transformers and peft makes millions of objects that live as long as
    the process. Collected while they load, they cost ~15% of the load (1.2 of 8.2 s for a
    training child's imports on a 2-core CPU) and free almost nothing; afterwards every full
    collection walks them all again. So: no collection while loading, then every object
    made so far is frozen, out of the collector's reach for good (and, in a process that
    forks, out of the pages a collection would otherwise touch in each child)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
