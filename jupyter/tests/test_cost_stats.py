"""The statistics of examples/inference/ (stats.py), the harness behind
docs/inference.md's cost figures: each is checked on inputs whose answer is
known, so a figure in the docs cannot come from a formula that is off."""
import itertools
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import ROOT, missing

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(ROOT, "bin", "vramscope")
INFERENCE = os.path.join(ROOT, "examples", "inference")
sys.path.insert(0, INFERENCE)
import lockstep as lockstep_py  # noqa: E402  (examples/inference/lockstep.py: its summaries)
import stats  # noqa: E402  (examples/inference/stats.py: no torch)

sys.path.remove(INFERENCE)


def test_median_interval_is_the_order_statistics_that_hold_the_median():
    assert stats.median_ci(list(range(5))) == (2, None)  # too few for 95%
    assert stats.median_ci(list(range(6))) == (2.5, [0, 5])  # 2/64 outside: 3.1% < 5%
    assert stats.median_ci(list(range(100))) == (49.5, [39, 60])
    rng = random.Random(7)
    miss = 0
    for _ in range(2000):  # skewed noise: the true median of Exp(1) is ln 2
        _, (lo, hi) = stats.median_ci([rng.expovariate(1) for _ in range(40)])
        miss += not lo <= 0.6931 <= hi
    assert miss / 2000 < 0.05


def test_shifts_are_unbiased_where_the_mean_of_ratios_is_not():
    pairs = [(1.0, 0.5), (1.0, 1.5)]  # x equals the reference's mean: no shift
    assert stats.shifts(pairs) == [0.5, -0.5] and sum(stats.shifts(pairs)) == 0
    assert sum(x / r - 1 for x, r in pairs) / 2 == pytest.approx(1 / 3)  # what the ratios would have said
    assert stats.shifts([(1.1, 1.0), (2.2, 2.0)]) == pytest.approx([0.1 / 1.5, 0.2 / 1.5])


def test_a_tick_delay_is_read_from_the_token_it_fell_in_against_its_neighbours():
    """Tokens of 10 ms; the one a tick began in took 0.3 ms more. Ticks whose
    neighbours also had one, and ticks in a call's first or last token, are
    left out."""
    calls, ticks, t = [], [], 0.0
    for _ in range(3):
        toks = []
        for k in range(20):
            d = 0.010
            if k in (5, 12, 13, 0, 19):  # 12 and 13: neighbours, both left out; 0 and 19: the ends
                ticks.append(t + 0.001)
                d += 0.0003
            toks.append((t, t + d))
            t += d
        calls.append(toks)
    got, ref = stats.tick_delays(calls, sorted(ticks))
    assert len(got) == 3 and ref == pytest.approx(0.010)  # token 5 of each call; its neighbours' 10 ms
    assert all(g == pytest.approx(0.0003 / 0.010) for g in got)
    assert stats.tick_delays(calls, []) == ([], None)


def lockstep(daemon, env, seconds, *extra):
    """lockstep.py with the lockstep_child.py stand-ins, the agent's child
    registering with the test's daemon."""
    if not os.path.exists(BIN):
        missing("bin/vramscope is not built (make build)")
    res = subprocess.run([sys.executable, os.path.join(INFERENCE, "lockstep.py"),
                          "--workload", "serve", "--seconds", str(seconds), "--warm-s", "0.2", "--vramscope", BIN,
                          "--script", os.path.join(HERE, "lockstep_child.py"), "--socket", daemon.socket, *extra],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def test_lockstep_pairs_the_same_call_of_both_processes_in_turns(daemon, env):
    """lockstep.py against two children that answer known times (the one
    under `vramscope run` 2% slower): every round asks the same call of both,
    in an order that swaps each round; the warm-up rounds are apart; the
    shift found is the 2%."""
    out, _ = lockstep(daemon, env, 0.5)
    assert out["failed"] is None
    rows = out["rows"]
    assert len(rows) > 10 and [r["call"] for r in rows] == list(range(len(rows)))
    assert [r["first"] for r in rows[:4]] == ["plain", "agent", "plain", "agent"]
    assert all(r["agent"] == pytest.approx(r["plain"] * 1.02) for r in rows)
    assert rows[0]["warm"] and not rows[-1]["warm"]
    assert out["agent_vs_plain"]["pairs"] + out["warm_rounds"]["pairs"] == len(rows)
    assert out["agent_vs_plain"]["mean"] == pytest.approx(0.02, rel=0.1)
    assert out["own"] == {"plain": {"calls": len(rows), "under_agent": False},
                          "agent": {"calls": len(rows), "under_agent": True}}


def test_lockstep_control_sets_two_plain_processes_against_each_other(daemon, env):
    """--control: a second plain process takes its turn in every round, the
    three in each of their six orders in turn; the two plain processes
    differ by nothing, the agent's by its 2% against either and both."""
    out, _ = lockstep(daemon, env, 0.5, "--control")
    rows = out["rows"]
    assert len(rows) > 12 and out["failed"] is None
    firsts = [tuple(r["order"]) for r in rows[:6]]
    assert sorted(firsts) == sorted(itertools.permutations(("plain", "agent", "plain2")))
    assert [tuple(r["order"]) for r in rows[6:12]] == firsts
    assert all(r["plain2"] == r["plain"] for r in rows)
    assert out["plain2_vs_plain"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert out["agent_vs_plains"]["mean"] == pytest.approx(0.02, rel=0.1)
    assert out["agent_vs_plain"]["mean"] == pytest.approx(0.02, rel=0.1)
    # which of agent and plain came first splits the counted rounds in two
    assert out["by_order"]["plain"]["pairs"] + out["by_order"]["agent"]["pairs"] == out["agent_vs_plain"]["pairs"]
    assert out["own"]["plain2"] == {"calls": len(rows), "under_agent": False}


def test_lockstep_summaries_read_rounds_kept_before_the_control():
    """Rounds of two processes kept before --control (only "first", no
    "order": docs/gpu/inference/run-20261203g and h) split by order as
    lockstep.py splits new ones, and give no control figures."""
    old = [{"call": i, "first": f, "warm": i < 2, "plain": 1.0, "agent": 1.01 if f == "plain" else 0.97}
           for i, f in enumerate(["plain", "agent"] * 10)]
    new = [dict(r, order=[r["first"], "agent" if r["first"] == "plain" else "plain"]) for r in old]
    for rows in (old, new):
        out = lockstep_py.summaries(rows)
        assert out["by_order"]["plain"]["mean"] == pytest.approx(0.01)
        assert out["by_order"]["agent"]["mean"] == pytest.approx(-0.03)
        assert out["agent_vs_plain"]["pairs"] == 18 and out["warm_rounds"]["pairs"] == 2
        assert "plain2_vs_plain" not in out


def test_lockstep_keeps_the_rounds_before_a_child_ends(daemon, env):
    """The child under the agent exits at call 7: the seven rounds before it
    are printed, with what ended, and the driver exits cleanly."""
    out, err = lockstep(daemon, env | {"LOCKSTEP_DIE_AT": "7"}, 30)
    assert len(out["rows"]) == 7 and "ended at call 7" in out["failed"] and "ended at call 7" in err
    assert out["own"]["agent"] is None  # round 7 asks the agent first: the plain child made 7 calls
    assert out["own"]["plain"] == {"calls": 7, "under_agent": False}
