"""The sampling clock's windows last window_s, not window_s rounded up to the
clock's tick (a 15 ms window lasted one 50 ms tick on the H200, tripling the
duty that bounds the default mode's cost: docs/inference.md)."""
import threading
import time

import pytest

from vramscope.agent import _schedule


def clock_schedule(spec):
    calls = []
    s = _schedule.Schedule(None, lambda clear: calls.append(("start", clear)), lambda: calls.append(("stop",)),
                           _schedule.parse(spec))
    s.hook = object()  # as if begin() had hooked optimizer steps: the clock may open windows
    s.began_t = s.closed_t = time.monotonic()
    return s, calls


def test_next_wait_ends_a_window_on_time_and_never_spins():
    s, _ = clock_schedule("period_s=1,window_s=0.01,warmup=0,warmup_allocs=0")
    t = s.closed_t
    assert s.next_wait(t) == _schedule.TICK_S  # the next window is 0.99 s away
    assert s.next_wait(t + 0.985) == pytest.approx(0.005)  # due before the next tick: wake then
    s.tick(t + 0.99)
    assert s.on and s.by_clock
    assert s.next_wait(s.opened_t + 0.004) == pytest.approx(0.006)  # closes at window_s, not a tick later
    s.want = 1  # held for a snapshot past its end: the tick's pace, not a spin
    assert s.next_wait(s.opened_t + 0.5) == _schedule.TICK_S
    s.want = 0
    s.tick(s.opened_t + 0.011)
    assert not s.on
    s.hook = None  # detached: the clock may not open one, however late
    assert s.next_wait(s.closed_t + 10) == _schedule.TICK_S


def test_clock_windows_record_their_seconds():
    s, calls = clock_schedule("period_s=0.2,window_s=0.01,warmup=0,warmup_allocs=0")
    th = threading.Thread(target=s._run_clock, daemon=True)
    th.start()
    time.sleep(1.5)
    s.quit.set()
    th.join(2)
    st = s.state()
    per_window = st["recorded_s"] / max(1, st["windows"])
    # 7 windows in 1.5 s at a 0.2 s period; each 10 ms and some wake-up late, where one tick was 50 ms
    assert st["windows"] >= 4 and st["clock_windows"] == st["windows"], st
    assert per_window < 0.03, st
    assert ("start", True) in calls and ("stop",) in calls
