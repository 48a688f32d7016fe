"""Loading with the collector paused: it runs again afterwards, whatever happened."""

import gc

import pytest

from app.core.loading import collector_paused


def test_the_collector_is_paused_while_loading_and_runs_again_after_even_a_failure() -> None:
    before = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]  # noqa: F841  (objects loaded meanwhile)
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + 1000  # what was loaded is frozen
    with pytest.raises(ImportError), collector_paused():
        raise ImportError("a library that cannot load")
    assert gc.isenabled()
