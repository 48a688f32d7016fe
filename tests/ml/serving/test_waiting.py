"""The engine's waiting line: a turn per caller in rotation, first come first served
within a caller."""

from app.ml.serving.requests import GenerationRequest, Sampling
from app.ml.serving.waiting import WaitingLine


def request(caller: int | None, name: str) -> GenerationRequest:
    made = GenerationRequest([1], None, Sampling(), lambda event: None, 0.0, caller=caller)
    made.text_sent = name  # a label to read the order by
    return made


def names(requests: list[GenerationRequest]) -> list[str]:
    return [r.text_sent for r in requests]


def take_all(line: WaitingLine) -> list[str]:
    return names([line.take() for _ in range(len(line))])


def test_callers_take_turns_and_each_ones_requests_keep_their_order() -> None:
    line = WaitingLine()
    for n in range(4):
        line.append(request(1, f"a{n}"))
    line.append(request(2, "b0"))
    line.append(request(None, "q0"))  # qatune's own
    line.append(request(2, "b1"))
    assert len(line) == 7 and (line.of(1), line.of(2), line.of(3)) == (4, 2, 0)
    assert line.first().text_sent == "a0"
    assert take_all(line) == ["a0", "b0", "q0", "a1", "b1", "a2", "a3"]
    assert not line


def test_a_caller_that_comes_back_takes_its_turn_after_those_waiting() -> None:
    line = WaitingLine()
    line.append(request(1, "a0"))
    line.append(request(1, "a1"))
    assert line.take().text_sent == "a0"
    line.append(request(2, "b0"))
    assert take_all(line) == ["a1", "b0"]
    line.append(request(1, "a2"))
    line.append(request(2, "b1"))
    line.append(request(1, "a3"))
    assert take_all(line) == ["a2", "b1", "a3"]


def test_requests_put_back_are_first_again_in_the_order_taken() -> None:
    line = WaitingLine()
    for name, caller in [("a0", 1), ("a1", 1), ("b0", 2), ("c0", 3), ("b1", 2)]:
        line.append(request(caller, name))
    taken = [line.take(), line.take()]  # a0, b0: their adapters are still being read
    line.put_back(taken)
    assert len(line) == 5
    assert take_all(line) == ["a0", "b0", "c0", "a1", "b1"]


def test_removed_and_cleared_requests_leave_the_line() -> None:
    line = WaitingLine()
    gone = request(1, "a0")
    for made in [gone, request(2, "b0"), request(1, "a1")]:
        line.append(made)
    line.remove(gone)
    assert (len(line), line.of(1)) == (2, 1)
    assert sorted(names(list(line))) == ["a1", "b0"]
    assert sorted(names(line.clear())) == ["a1", "b0"] and len(line) == 0 and not list(line)
