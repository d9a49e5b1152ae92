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


def test_next_wait_sleeps_until_the_next_thing_to_do_and_never_spins():
    s, _ = clock_schedule("period_s=1,window_s=0.01,warmup=0,warmup_allocs=0")
    t = s.closed_t
    assert s.next_wait(t) == pytest.approx(0.99)  # the next window is 0.99 s away: no tick before it
    assert s.next_wait(t + 0.985) == pytest.approx(0.005)
    s.last_step_t = t + 0.5  # a step came: the clock acts once none came for period_s
    assert s.next_wait(t + 0.6) == pytest.approx(0.9)
    s.last_step_t = None
    s.tick(t + 0.991)  # due at 0.99 s (not exactly: t - closed_t rounds either way, with t the uptime)
    assert s.on and s.by_clock
    assert s.next_wait(s.opened_t + 0.004) == pytest.approx(0.006)  # closes at window_s, not a tick later
    s.want = 1  # held for a snapshot past its end: asleep until woken (release), not a spin
    assert s.next_wait(s.opened_t + 0.5) == _schedule.IDLE_S
    s.want = 0
    s.tick(s.opened_t + 0.011)
    assert not s.on
    s.hook = None  # detached: the clock may not open one, however late
    assert s.next_wait(s.closed_t + 10) == _schedule.IDLE_S


def test_a_snapshot_wakes_the_clock():
    s, _ = clock_schedule("period_s=600,window_s=0.05,warmup=0,warmup_allocs=0")
    th = threading.Thread(target=s._run_clock, daemon=True)
    th.start()
    time.sleep(0.2)  # the clock is asleep for up to IDLE_S now
    t = time.monotonic()
    assert s.wait_recorded(3) is None  # a window opened for it and recorded its 0.05 s
    took = time.monotonic() - t
    s.release()
    deadline = time.monotonic() + 2
    while s.on and time.monotonic() < deadline:
        time.sleep(0.01)
    closed = time.monotonic() - t
    s.quit.set()
    s.wake.set()
    th.join(2)
    assert 0.04 < took < 1, took
    assert not s.on and closed < 1.5, closed  # released: closed at once, not after IDLE_S
    assert s.clock_windows == 1


def test_clock_windows_record_their_seconds():
    s, calls = clock_schedule("period_s=0.2,window_s=0.01,warmup=0,warmup_allocs=0")
    th = threading.Thread(target=s._run_clock, daemon=True)
    th.start()
    time.sleep(1.5)
    s.quit.set()
    s.wake.set()
    th.join(2)
    st = s.state()
    per_window = st["recorded_s"] / max(1, st["windows"])
    # 7 windows in 1.5 s at a 0.2 s period; each 10 ms and some wake-up late, where one tick was 50 ms
    assert st["windows"] >= 4 and st["clock_windows"] == st["windows"], st
    assert per_window < 0.03, st
    assert ("start", True) in calls and ("stop",) in calls


def test_an_idle_clock_sleeps():
    """Between windows the clock sleeps until the next one is due: it woke 20
    times a second before (0.2% of a core on the H200)."""
    s, _ = clock_schedule("period_s=600,window_s=0.3,warmup=0,warmup_allocs=0")
    ticks = []
    tick = s.tick
    s.tick = lambda now: (ticks.append(now), tick(now))
    th = threading.Thread(target=s._run_clock, daemon=True)
    th.start()
    time.sleep(1.0)
    s.quit.set()
    s.wake.set()
    th.join(2)
    assert len(ticks) <= 2 and not s.on, ticks
