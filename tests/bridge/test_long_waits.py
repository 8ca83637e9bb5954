"""Mock waits beyond every timer cap sleep to their deadline, in bounded chunks."""

from __future__ import annotations

import anyio

from dsh_sidecar.bridge.hooks.mock import MAX_SLEEP_CHUNK_S, sleep_ms


class FakeTime:
    """A clock that a fake sleep advances; ``cap`` makes each sleep return early, like a capped timer."""

    def __init__(self, cap: float | None = None) -> None:
        self.now = 0.0
        self.cap = cap
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds if self.cap is None else min(seconds, self.cap)


def test_a_wait_longer_than_a_node_timer_can_hold_sleeps_its_whole_length() -> None:
    time = FakeTime()
    ms = 2**31 + 5  # above setTimeout's 2^31-1 ms cap
    anyio.run(lambda: sleep_ms(ms, sleep=time.sleep, clock=time.clock))
    assert time.now >= ms / 1000
    assert max(time.sleeps) <= MAX_SLEEP_CHUNK_S


def test_a_timer_that_fires_early_is_slept_again_until_the_deadline() -> None:
    time = FakeTime(cap=100.0)
    anyio.run(lambda: sleep_ms(1_000_000, sleep=time.sleep, clock=time.clock))
    assert time.now >= 1000.0
    assert len(time.sleeps) >= 10


def test_a_zero_wait_does_not_sleep() -> None:
    time = FakeTime()
    anyio.run(lambda: sleep_ms(0, sleep=time.sleep, clock=time.clock))
    assert time.sleeps == []
