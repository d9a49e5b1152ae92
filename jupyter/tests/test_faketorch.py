"""The torch-facing parts against a tiny fake torch (tests/faketorch) that logs the
agent's calls in order: torch._calls. The real thing runs on a GPU later; these
check call order and arguments."""
import os
import pickle
import sys
import time

import pytest

from conftest import CHILD, FAKETORCH, PKG_PARENT, VRAMSCOPE, Child, faketorch_env

CALLS = "[list(c) for c in torch._calls]"


def names(calls):
    return [c[0] for c in calls]


def test_recording_waits_for_cuda_init(daemon, env, spawn):
    c = spawn(faketorch_env(env), "import torch, vramscope\nvramscope.attach(max_entries=1234)")
    reg = daemon.wait_register(pid=c.pid)
    assert reg["torch"] == "2.99.0+fake" and reg["cuda"] == "12.8"
    assert reg["recording"] is True and "note" not in reg and reg["device"] == -1
    time.sleep(0.3)
    calls = c(CALLS)
    assert ["_lazy_call", False] in calls
    assert "record" not in names(calls) and "cuda_init" not in names(calls)
    assert c("torch.cuda.is_initialized()") is False  # the agent never initialises CUDA
    assert c("vramscope.status()")["recording_state"] == "pending"

    c("torch.cuda.init()")  # the program's first CUDA use
    calls = c(CALLS)
    n = names(calls)
    assert n.index("cuda_init") < n.index("record") < n.index("attach_oom_observer")
    rec = calls[n.index("record")]
    assert rec[1] == {"enabled": "all", "context": "alloc", "stacks": "python", "max_entries": 1234,
                      "global_record_annotations": True}
    assert rec[2] is False  # ran inside CUDA init, before the first allocation
    assert "is_available" not in n
    st = c("vramscope.status()")
    assert st["recording"] and st["annotations"] and st["oom_observer"]
    # what the daemon knows changed (device known now): the agent registers again
    reg = daemon.wait_register(pid=c.pid, count=2, timeout=5)
    assert reg["device"] == 0 and reg["recording"] is True


def test_older_torch_without_global_record_annotations(daemon, env, spawn):
    c = spawn(faketorch_env(env, FAKE_TORCH_OLD="1"), "import torch, vramscope\nvramscope.attach(stacks='all')\n"
                                                       "torch.cuda.init()")
    daemon.wait_register(pid=c.pid)
    calls = c(CALLS)
    rec = [x for x in calls if x[0] == "record"]
    assert len(rec) == 1 and rec[0][1]["global_record_annotations"] is False and rec[0][1]["stacks"] == "all"
    st = c("vramscope.status()")
    assert st["recording"] is True and st["annotations"] is False


def test_attach_after_cuda_init_starts_now_and_sends_counters(daemon, env, spawn):
    c = spawn(faketorch_env(env, LOCAL_RANK="1", FAKE_TORCH_MEMORY_ON="1"),
              "import torch\ntorch.cuda.init()\nimport vramscope\nvramscope.attach()")
    reg = daemon.wait_register(pid=c.pid)
    assert reg["recording"] is True and reg["device"] == 1
    assert ["_lazy_call", True] in c(CALLS)
    t = daemon.wait_torch(pid=c.pid, timeout=5)
    assert (t["allocated"], t["reserved"], t["max_allocated"], t["device"]) == (1000, 4096, 2000, 1)
    assert abs(t["time_ms"] / 1000 - time.time()) < 10
    assert ["counter", 1] in c(CALLS)  # asked torch about the device its memory is on, by index


def test_no_counters_before_cuda_init(daemon, env, spawn):
    c = spawn(faketorch_env(env), "import torch, vramscope\nvramscope.attach()")
    daemon.wait_register(pid=c.pid)
    time.sleep(1.5)
    assert "counter" not in names(c(CALLS))
    assert daemon.torch == []


OOM = """import torch, vramscope
vramscope.attach()
torch.cuda.init()
def oom(n):
    try:
        torch._fake_oom(0, n, 80 << 30, 77)
    except torch.cuda.OutOfMemoryError:
        return "raised"
"""


def test_oom_observer_snapshots_inside_the_callback(daemon, env, spawn):
    c = spawn(faketorch_env(env), OOM)
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    assert c("oom(12345)") == "raised"
    assert c("oom(999)") == "raised"  # torch retries call the observer again: one capture only
    n = names(c(CALLS))
    i = n.index("oom_begin")
    # the snapshot first; then the failing step's levels (the allocator's counters)
    assert n[i:i + 2] == ["oom_begin", "_snapshot"]
    assert set(n[i + 2:n.index("oom_end", i)]) <= {"counter", "reset_peak"}
    assert n.count("_snapshot") == 1
    cap = daemon.wait_captured()
    assert cap["reason"] == "oom" and cap["device"] == 0 and cap["entries"] == 5
    assert cap["oom"] == {"device": 0, "requested": 12345, "device_free": 77, "device_allocated": 1000,
                          "device_total": 80 << 30}
    assert cap["path"].startswith(daemon.incoming_dir + os.sep) and cap["path"].endswith(".part")
    with open(cap["path"], "rb") as f:
        snap = pickle.load(f)
    assert snap["segments"][0]["allocated_size"] == 1000 and len(snap["device_traces"]) == 2
    with open(cap["path"], "rb") as f:
        assert f.read(2) == b"\x80\x04"  # pickle protocol 4
    rc, _, err = c.quit()
    assert rc == 0 and "out of memory on cuda:0" in err


def test_oom_under_a_cap_carries_the_cap(daemon, env, spawn):
    """The walk's section of an OOM snapshot says the process's cap exactly
    (memory_caps), for the devices the snapshot has segments on."""
    c = spawn(faketorch_env(env), OOM + "torch.cuda.set_per_process_memory_fraction(0.25, 0)\n")
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    assert c("oom(12345)") == "raised"
    cap = daemon.wait_captured()
    with open(cap["path"], "rb") as f:
        snap = pickle.load(f)
    assert snap["vramscope_tensors"]["memory_caps"] == [[0, int(0.25 * 150754820096)]]
    c.quit()


def test_oom_snapshot_survives_the_program_exiting(daemon, env, tmp):
    """The OOM usually ends the program: the capture must still reach the daemon."""
    script = os.path.join(tmp, "dies.py")
    with open(script, "w") as f:
        f.write(OOM + "torch._fake_oom(0, 5, 10, 1)\n")  # uncaught: the program dies
    import subprocess

    p = subprocess.run([sys.executable, script], env=faketorch_env(env), capture_output=True, text=True, timeout=20)
    assert p.returncode == 1 and "OutOfMemoryError" in p.stderr
    cap = daemon.wait_captured(timeout=2)
    assert cap["oom"]["requested"] == 5 and os.path.getsize(cap["path"]) == cap["bytes"]


def test_dump_with_torch(daemon, env, spawn):
    c = spawn(faketorch_env(env), "import torch, vramscope\nvramscope.attach()")
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    resp = daemon.dump(c.pid, os.path.join(daemon.incoming_dir, "early.part"))
    assert resp["error"]["code"] == -32006 and "CUDA is not initialised" in resp["error"]["message"]
    c("torch.cuda.init()")
    path = os.path.join(daemon.incoming_dir, "d.part")
    res = daemon.dump(c.pid, path)["result"]
    assert res["entries"] == 5 and res["bytes"] == os.path.getsize(path) and res["device"] == 0
    with open(path, "rb") as f:
        assert pickle.load(f)["device_traces"][0][0] == {"action": "alloc", "size": 1}


TRAIN = """import torch

def step():
    loss = torch.Tensor()
    loss.backward()

def step2():
    torch.autograd.backward([torch.Tensor()])
"""


def test_backward_wrapper_counts_its_own_time_not_the_backward_pass(env, spawn, tmp):
    # The inner backward sleeps 0.3 s: the wrapper's own cost must not include it.
    c = spawn(faketorch_env(env), "import time, torch, vramscope\n"
                                  "slow = torch.autograd.backward\n"
                                  "torch.autograd.backward = lambda *a, **k: (time.sleep(0.3), slow(*a, **k))[1]\n"
                                  "vramscope.attach()")
    c("exec t = time.perf_counter(); torch.Tensor().backward(); took = time.perf_counter() - t")
    assert c("took") >= 0.3
    cost = c("vramscope.status()['cost']['backward_wrapper_s']")
    assert 0 < cost < 0.1, cost


def test_backward_runs_inside_record_function_of_the_caller(env, spawn, tmp):
    with open(os.path.join(tmp, "train.py"), "w") as f:
        f.write(TRAIN)
    train = os.path.join(tmp, "train.py")
    c = spawn(faketorch_env(env), "import sys; sys.path.insert(0, %r)\nimport torch, vramscope, train\n"
                                  "vramscope.attach()" % tmp)
    assert c("getattr(torch.Tensor.backward, '__vramscope__', False)") is True
    assert c("torch.Tensor.backward.__wrapped__.__qualname__") == "Tensor.backward"
    c("torch.cuda.init()")
    assert c.wait("vramscope.status()['recording']")
    c("exec torch._calls.clear(); train.step(); train.step2()")
    calls = c(CALLS)
    at5 = ["vramscope.backward@%s:5" % train]
    at8 = ["vramscope.backward@%s:8" % train]
    assert calls == [["Tensor.backward", at5], ["autograd.backward", at5], ["autograd.backward", at8]]
    assert c("vramscope.status()['cost']['backward_wrapper_s']") > 0
    # Between sampled windows (recording off) nothing would keep the mark: no
    # record_function (it is most of the wrapper's cost), only the call site.
    c("exec from vramscope.agent import _torch as T; T.stop_recording(torch); torch._calls.clear(); train.step2()")
    assert c(CALLS) == [["autograd.backward", []]]
    c("exec T.start_recording(torch, 1000, 'python'); torch._calls.clear(); train.step2()")
    assert c(CALLS) == [["autograd.backward", at8]]
    c("vramscope.detach()")
    assert c("hasattr(torch.Tensor.backward, '__wrapped__')") is False
    assert c("torch.autograd.backward.__module__") == "torch.autograd"
    c("exec torch._calls.clear(); train.step()")
    assert c(CALLS) == [["Tensor.backward", []], ["autograd.backward", []]]


def test_annotate_backward_off(env, spawn):
    c = spawn(faketorch_env(env), "import torch, vramscope\nvramscope.attach(annotate_backward=False)")
    assert c("getattr(torch.Tensor.backward, '__vramscope__', False)") is False


def test_torch_imported_after_attach(daemon, env, spawn):
    c = spawn(faketorch_env(env), "import vramscope\nvramscope.attach()")
    reg = daemon.wait_register(pid=c.pid)
    assert "torch" not in reg and reg["recording"] is False
    c("exec import torch")
    assert c("getattr(torch.Tensor.backward, '__vramscope__', False)") is True
    reg = daemon.wait_register(pid=c.pid, count=2, timeout=5)
    assert reg["torch"] == "2.99.0+fake" and reg["recording"] is True
    c("torch.cuda.init()")
    assert c.wait("vramscope.status()['recording']")


def test_cpu_only_torch_counters_only(daemon, env, spawn):
    c = spawn(faketorch_env(env, FAKE_TORCH_CPU="1"), "import torch, vramscope\nvramscope.attach()")
    reg = daemon.wait_register(pid=c.pid)
    assert reg["note"] == "CUDA is not available"
    rc, _, err = c.quit()
    assert "vramscope: CUDA is not available: registering for counters only" in err


def test_recording_disabled(daemon, env, spawn):
    c = spawn(faketorch_env(env, VRAMSCOPE_RECORD="0"), "import torch, vramscope\nvramscope.attach()\n"
                                                        "torch.cuda.init()")
    reg = daemon.wait_register(pid=c.pid)
    assert reg["note"] == "recording disabled" and reg["recording"] is False
    assert "record" not in names(c(CALLS))
    assert "attach_oom_observer" in names(c(CALLS))


def run_under_vramscope(env, args, tmp, **kw):
    cmd = VRAMSCOPE + ["run"] + args + ["--", "python3", CHILD]
    return Child(env, cmd=cmd, cwd=tmp, **kw)


def test_auto_mode_registers_only_after_cuda_init(daemon, env, tmp):
    e = faketorch_env(env, CHILD_SETUP="import torch")
    e["PYTHONPATH"] = FAKETORCH  # the package comes from the bootstrap's own location
    c = run_under_vramscope(e, ["--socket", daemon.socket, "--max-entries", "777"], tmp)
    try:
        assert c("'vramscope' in sys.modules and sys.modules['vramscope'].__file__.startswith(%r)" % PKG_PARENT)
        assert c("getattr(torch.Tensor.backward, '__vramscope__', False)") is True
        time.sleep(0.8)
        assert daemon.connections == 0  # torch imported, CUDA not initialised (a torchrun launcher)
        assert not any(t.startswith("vramscope") for t in c("[t.name for t in __import__('threading').enumerate()]"))
        assert c("torch._calls") == [["_lazy_call", False]]
        c("torch.cuda.init()")
        reg = daemon.wait_register(pid=c.pid, timeout=5)
        assert reg["max_entries"] == 777 and reg["recording"] is True and reg["device"] == 0
        assert reg["argv"] == [CHILD]
        rec = [x for x in c(CALLS) if x[0] == "record"][0]
        assert rec[1]["max_entries"] == 777 and rec[2] is False
        rc, out, err = c.quit()
        assert rc == 0 and err == ""  # auto mode prints nothing when all is well
    finally:
        c.kill()


# --- sampled recording (vramscope/agent/_schedule.py) ---------------------------------

SAMPLED = OOM.replace("vramscope.attach()", "vramscope.attach(sample='every=5,window=2,warmup=1')") + \
    "from torch.optim import optimizer as O\n"


def records(calls):
    return [(c[1]["enabled"], bool(c[1].get("clear_history"))) for c in calls if c[0] == "record"]


def test_sampled_recording_windows(daemon, env, spawn):
    c = spawn(faketorch_env(env), SAMPLED)
    daemon.wait_register(pid=c.pid)
    assert records(c(CALLS)) == [("all", False)]  # the warm-up window, from CUDA init
    on = []
    for _ in range(12):
        c("O._fake_step()")
        on.append(c("vramscope.status()['sampling']['recording_now']"))
    # warm-up: 1 step; then 2 steps recorded out of every 5, each window from an empty history
    assert on == [False, False, False, True, True, False, False, False, True, True, False, False]
    assert records(c(CALLS)) == [("all", False), (None, False), ("all", True), (None, False), ("all", True),
                                 (None, False)]
    st = c("vramscope.status()['sampling']")
    duty = st.pop("recorded_s"), st.pop("since_s")
    assert st == {"sampled": True, "recording_now": False, "steps": 12, "windows": 3, "recorded_steps": 5,
                  "clock_windows": 0}
    assert 0 < duty[0] < duty[1], duty  # seconds recorded, of those since the agent began
    cost = c("vramscope.status()['cost']")
    assert cost["hook_s"] > 0 and cost["agent_threads_cpu_s"] > 0, cost
    # the stack sampler's thread is among the agent's threads counted: the
    # cost read between two reads of the four threads' CPU lies between them
    four = ("(lambda a, s: sum(a._thread_cpu_s(t) for t in (a._agent.link.thread, a._agent.captures.worker, "
            "a._agent.recording.clock(), s._sampler.thread)))(__import__('vramscope.agent._agent', fromlist=['x']), "
            "__import__('vramscope.agent._stacks', fromlist=['x']))")
    before, counted, after = c("(%s, vramscope.status()['cost']['agent_threads_cpu_s'], %s)" % (four, four))
    assert 0 < before <= counted + 1e-6 and counted <= after + 1e-6, (before, counted, after)
    c("vramscope.detach()")
    n = len(c(CALLS))
    c("O._fake_step()")  # the hook is gone with the agent
    assert records(c(CALLS)[n:]) == []


def test_no_warmup_window_when_both_warmups_are_zero(daemon, env, spawn):
    """warmup=0,warmup_allocs=0: nothing is recorded at CUDA init; the first
    window is the steps' (every=5, window=2: opened at step 3, closed at step 5)."""
    prog = OOM.replace("vramscope.attach()", "vramscope.attach(sample='every=5,window=2,warmup=0,warmup_allocs=0')") + \
        "from torch.optim import optimizer as O\n"
    c = spawn(faketorch_env(env), prog)
    daemon.wait_register(pid=c.pid)
    assert records(c(CALLS)) == []  # no warm-up window
    on = []
    for _ in range(6):
        c("O._fake_step()")
        on.append(c("vramscope.status()['sampling']['recording_now']"))
    assert on == [False, False, True, True, False, False]
    assert records(c(CALLS)) == [("all", True), (None, False)]


def test_snapshot_between_windows_waits_for_the_next_window(daemon, env, spawn):
    import threading

    c = spawn(faketorch_env(env), SAMPLED)
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    c("O._fake_step()")  # warm-up over: recording off
    assert not c("vramscope.status()['sampling']['recording_now']")
    path = os.path.join(daemon.incoming_dir, "gap.part")
    got = {}
    t = threading.Thread(target=lambda: got.update(daemon.dump(c.pid, path, timeout=20)))
    t.start()
    time.sleep(0.5)
    assert "_snapshot" not in names(c(CALLS))  # nothing is taken while recording is off
    c("O._fake_step()")  # the next boundary opens a window at once (not after 3 more steps)
    assert c("vramscope.status()['sampling']['recording_now']")
    c("torch.cuda.memory._fake_alloc(4096)")
    c("O._fake_step()")
    time.sleep(0.3)
    assert "_snapshot" not in names(c(CALLS))  # one step recorded of the two the window holds
    c("torch.cuda.memory._fake_alloc(8192)")
    c("O._fake_step()")
    t.join(20)
    assert "result" in got, got
    calls = c(CALLS)
    n = names(calls)
    i = n.index("_snapshot")
    assert records(calls[:i]) == [("all", False), (None, False), ("all", True)]  # on when taken
    with open(path, "rb") as f:
        snap = pickle.load(f)
    sizes = [e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc"]
    assert sizes == [4096, 8192]  # the window's history: consistent with the segments
    c("O._fake_step()")  # released: the overdue window closes
    assert records(c(CALLS))[-1] == (None, False)


def test_registers_the_device_it_holds_memory_on_with_its_uuid(daemon, env, spawn):
    """The device is the one the allocator holds memory on, with its UUID for
    the daemon to find NVML's index (LOCAL_RANK said 1 here: wrong for ranks
    that share a GPU or have their own CUDA_VISIBLE_DEVICES)."""
    c = spawn(faketorch_env(env, LOCAL_RANK="1"), SAMPLED)
    daemon.wait_register(pid=c.pid)
    c("torch.cuda.memory._fake_alloc(1 << 20)")
    reg = daemon._wait(lambda: next((r for r in daemon.registrations if r.get("pid") == c.pid and r.get("device_uuid")),
                                    None), 10, "a registration with the device's UUID")
    assert reg["device"] == 0 and reg["local_rank"] == 1
    assert reg["device_uuid"] == "00000000-1edc-5c0a-7a0b-fc688ee35bbc"


def test_oom_between_windows_keeps_the_request_and_its_stack(daemon, env, spawn):
    c = spawn(faketorch_env(env), SAMPLED)
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    c("torch.cuda.memory._fake_alloc(1024)")  # recorded in the warm-up window
    c("O._fake_step()")
    assert c("oom(777)") == "raised"
    cap = daemon.wait_captured()
    with open(cap["path"], "rb") as f:
        snap = pickle.load(f)
    trace = snap["device_traces"][0]
    assert len(trace) == 1 and trace[0]["action"] == "oom" and trace[0]["size"] == 777
    assert trace[0]["device_free"] == 77
    assert "oom" in [fr["name"] for fr in trace[0]["frames"]]  # the program's function that asked
    agent = os.path.join(PKG_PARENT, "vramscope") + os.sep  # not "vramscope" anywhere: a checkout may be in /tmp/vramscope-ci
    assert not any(os.path.abspath(fr["filename"]).startswith(agent) for fr in trace[0]["frames"])
    assert snap["segments"][0]["allocated_size"] > 0  # the allocator's state is all there


def test_no_step_hook_records_every_step(daemon, env, spawn):
    c = spawn(faketorch_env(env, FAKE_TORCH_NO_STEP_HOOK="1"),
              "import torch, vramscope\nvramscope.attach()\ntorch.cuda.init()")
    daemon.wait_register(pid=c.pid)
    st = c("vramscope.status()['sampling']")
    assert st["sampled"] is False and st["recording_now"] is True


def test_sample_off_and_bad_specs(env, spawn):
    c = spawn(faketorch_env(env, VRAMSCOPE_SAMPLE="off"),
              "import torch, vramscope\nvramscope.attach()\ntorch.cuda.init()\nfrom torch.optim import optimizer as O")
    for _ in range(4):
        c("O._fake_step()")
    assert records(c(CALLS)) == [("all", False)]
    assert c("vramscope.status()['sampling']['sampled']") is False
    sys.path.insert(0, PKG_PARENT)
    try:
        from vramscope.agent import _schedule
    finally:
        sys.path.remove(PKG_PARENT)
    for bad in ("every=2,window=2", "window=0", "often=3", "every=x"):
        with pytest.raises(ValueError):
            _schedule.parse(bad)
    for bad in ("period_s=1,window_s=1", "window_s=0", "warmup_allocs=-1"):
        with pytest.raises(ValueError):
            _schedule.parse(bad)
    d = {"every": 100, "window": 2, "warmup": 3, "period_s": 30.0, "window_s": 0.3, "warmup_allocs": 20000}
    assert _schedule.parse("every=10") == dict(d, every=10)
    assert _schedule.parse("off") is None and _schedule.parse({"every": 8}) == dict(d, every=8)
    assert _schedule.parse("window_s=0.5,period_s=10") == dict(d, window_s=0.5, period_s=10.0)


def test_snapshot_when_training_pauses_between_windows(daemon, env, spawn):
    c = spawn(faketorch_env(env, VRAMSCOPE_STALL_S="0.5"), SAMPLED)
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    c("torch.cuda.memory._fake_alloc(4096)")
    c("O._fake_step()")  # warm-up over, and then no more steps
    t = time.monotonic()
    resp = daemon.dump(c.pid, os.path.join(daemon.incoming_dir, "paused.part"), timeout=10)
    assert "result" in resp, resp
    assert 0.4 < time.monotonic() - t < 5
    with open(resp["result"]["path"], "rb") as f:
        snap = pickle.load(f)
    assert snap["device_traces"] == [[]]  # no stale history: the allocator's state only
    assert snap["segments"][0]["allocated_size"] == 4096
    assert records(c(CALLS)) == [("all", False), (None, False)]  # no window was opened for it


# --- a program without optimizer steps: the sampling clock ------------------------

NO_STEPS = """import threading, time, torch, vramscope
vramscope.attach(sample='period_s=1.5,window_s=0.3,warmup_allocs=5')
torch.cuda.init()
def serve(n):  # a request loop on its own thread: one allocation every 10 ms, freed
    def run():
        for _ in range(n):
            torch.cuda.memory._fake_free(torch.cuda.memory._fake_alloc(4096))
            time.sleep(0.01)
    threading.Thread(target=run, daemon=True).start()
"""


def test_no_steps_warmup_ends_after_its_allocations_then_clock_windows(daemon, env, spawn):
    c = spawn(faketorch_env(env), NO_STEPS)
    daemon.wait_register(pid=c.pid)
    assert c("vramscope.status()['sampling']['recording_now']")  # the warm-up, from CUDA init
    for _ in range(4):
        c("torch.cuda.memory._fake_alloc(512)")
    time.sleep(0.6)
    assert c("vramscope.status()['sampling']['recording_now']")  # 4 of the 5 allocations: still warming up
    c("torch.cuda.memory._fake_alloc(512)")
    assert c.wait("not vramscope.status()['sampling']['recording_now']", timeout=3) is True
    t = time.monotonic()
    assert c.wait("vramscope.status()['sampling']['clock_windows'] >= 1", timeout=5) is True
    opened = time.monotonic() - t
    assert 0.3 < opened < 4, opened  # period_s - window_s (1.2 s) after the warm-up closed, not at once
    assert c.wait("not vramscope.status()['sampling']['recording_now']", timeout=3) is True
    st = c("vramscope.status()['sampling']")
    assert st["steps"] == 0 and st["recorded_steps"] == 0 and st["sampled"] is True
    assert records(c(CALLS))[:4] == [("all", False), (None, False), ("all", True), (None, False)]


def test_no_steps_snapshot_gets_a_clock_window_promptly(daemon, env, spawn):
    c = spawn(faketorch_env(env, VRAMSCOPE_SAMPLE="period_s=600,window_s=0.3,warmup_allocs=5"),
              NO_STEPS.replace("sample='period_s=1.5,window_s=0.3,warmup_allocs=5'", ""))
    daemon.wait_register(pid=c.pid)
    assert c.wait("vramscope.status()['registered']")
    c("serve(1000)")
    assert c.wait("not vramscope.status()['sampling']['recording_now']", timeout=3) is True
    time.sleep(0.3)
    t = time.monotonic()
    resp = daemon.dump(c.pid, os.path.join(daemon.incoming_dir, "serving.part"), timeout=10)
    took = time.monotonic() - t
    assert "result" in resp, resp
    assert 0.25 < took < 3, took  # a window of window_s opened for it at the clock's next tick
    with open(resp["result"]["path"], "rb") as f:
        snap = pickle.load(f)
    allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc"]
    assert len(allocs) >= 5 and all(e["size"] == 4096 for e in allocs)  # the requests of that window only
    assert c.wait("not vramscope.status()['sampling']['recording_now']", timeout=3) is True  # closed after it
    assert c("vramscope.status()['sampling']['clock_windows']") == 1


def test_step_levels_reach_the_daemon_and_ride_on_the_oom_capture(daemon, env, spawn):
    """Optimizer steps give agent.levels notifications (every 2 s) with the
    allocator's counters; the failing step goes with the OOM snapshot."""
    c = spawn(faketorch_env(env), OOM + "from torch.optim import optimizer as O\n")
    daemon.wait_register(pid=c.pid)
    for _ in range(3):
        c("O._fake_step()")

    def levels():
        return [m["params"] for _, m in daemon.messages if m.get("method") == "agent.levels"]

    deadline = time.time() + 10
    while not levels() and time.time() < deadline:
        time.sleep(0.1)
    got = [s for p in levels() for s in p["levels"]]
    assert [s["step"] for s in got] == [0, 1, 2] and {s["phase"] for s in got} == {"train"}
    # the first step is read; the fake's 0.1 ms steps make reads rarer after it (the 0.1% budget)
    allocated = c("torch.cuda.memory.ALLOCATED")
    assert got[0]["allocated"] == allocated and all(s["allocated"] in (allocated, -1) for s in got)
    assert levels()[0]["cap"] == 150754820096 and levels()[0]["device"] == 0  # the fake H200's memory, no fraction set
    assert c("oom(12345)") == "raised"
    cap = daemon.wait_captured()
    tail = cap["levels"]["levels"]
    assert tail[-1]["step"] == 3 and tail[-1]["oom"] is True
    assert c("vramscope.status()")["cost"]["levels_s"] > 0
