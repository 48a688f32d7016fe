"""Where a request for an adapter goes among a base model's vLLM servers."""

from collections import Counter

from app.ml.serving.vllm_replicas import SPILL_OVER, Replica, route


def replicas(count: int) -> list[Replica]:
    return [Replica(f"http://10.0.0.{i}:8000", None, healthy=True) for i in range(count)]


def test_an_adapter_goes_to_the_replica_that_holds_it() -> None:
    up = replicas(3)
    up[2].adapters.add("a")
    up[2].in_flight = SPILL_OVER - 1  # busier than the others, not enough to spill
    assert route(up, "a") is up[2]


def test_an_adapter_held_nowhere_has_one_home_and_the_homes_spread() -> None:
    up = replicas(4)
    homes = {name: route(up, name) for name in (f"adapter-{i}" for i in range(400))}
    assert all(route(list(reversed(up)), name) is home for name, home in homes.items())
    spread = Counter(home.url for home in homes.values() if home is not None)
    assert len(spread) == 4 and min(spread.values()) > 60  # 100 each, give or take


def test_a_busy_home_spills_over_to_the_least_busy() -> None:
    up = replicas(3)
    up[0].adapters.add("a")
    up[0].in_flight, up[1].in_flight, up[2].in_flight = SPILL_OVER + 3, 5, 3
    assert route(up, "a") is up[2]


def test_a_replica_that_is_down_gets_nothing_and_forgets_its_adapters() -> None:
    up = replicas(2)
    up[0].adapters.add("a")
    up[0].mark_down("unreachable")
    assert up[0].adapters == set() and up[0].problem == "unreachable"
    assert route(up, "a") is up[1] and route(up, None) is up[1]
    up[1].mark_down("exited")
    assert route(up, "a") is None


def test_the_base_model_goes_to_the_least_busy() -> None:
    up = replicas(3)
    up[0].in_flight, up[1].in_flight, up[2].in_flight = 4, 1, 2
    assert route(up, None) is up[1]
