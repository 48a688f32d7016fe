"""A training child ends as soon as the service that started it is gone."""

import multiprocessing

from app.worker.child import supervisor_watch


def test_a_child_sees_its_supervisor_gone_as_soon_as_the_pipe_closes() -> None:
    """The fork server outlives a killed service by seconds, and with it the child's
    PR_SET_PDEATHSIG: the child's own end of the pipe says it at once, messages in it or
    not."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    orphaned = supervisor_watch(sender)
    assert not orphaned()
    sender.send("a message the supervisor has not read")
    assert not orphaned()
    receiver.close()
    assert orphaned()
