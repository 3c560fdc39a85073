"""The loop thread the change feed, the refusal flusher and the reconcile worker run in."""

from __future__ import annotations

import threading

from control_plane.background import LoopThread


def test_stop_wakes_a_loop_asleep_in_wait_and_waits_for_it_to_end() -> None:
    loop = LoopThread("test-loop")
    asleep = threading.Event()
    ended = threading.Event()
    woken_by_stop: list[bool] = []

    def body() -> None:
        asleep.set()
        # An hour's sleep: only the stop can end it before the test does.
        woken_by_stop.append(loop.wait(3600))
        ended.set()

    loop.start(body)
    assert asleep.wait(10)
    loop.stop()
    assert ended.is_set()
    assert woken_by_stop == [True]
    assert not loop.running


def test_a_second_start_while_running_starts_no_second_loop() -> None:
    loop = LoopThread("test-loop")
    runs: list[str] = []
    started = threading.Event()

    def body() -> None:
        runs.append(threading.current_thread().name)
        started.set()
        while not loop.wait(3600):
            pass

    loop.start(body)
    assert started.wait(10)
    loop.start(body)
    loop.stop()
    assert runs == ["test-loop"]


def test_a_loop_can_run_again_after_a_stop() -> None:
    loop = LoopThread("test-loop")
    rounds: list[bool] = []
    started = threading.Event()

    def body() -> None:
        rounds.append(loop.stopping)
        started.set()
        loop.wait(3600)

    for _ in range(2):
        started.clear()
        loop.start(body)
        assert started.wait(10)
        loop.stop()
    assert rounds == [False, False]


def test_stop_before_start_is_harmless() -> None:
    loop = LoopThread("test-loop")
    loop.stop()
    assert not loop.running
