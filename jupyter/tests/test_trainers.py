"""The trainer callbacks (vramscope.hf, vramscope.lightning) in a real
transformers Trainer and a real Lightning Trainer on CPU: a tiny model, 3
optimizer steps of 2 accumulated micro-batches, an evaluation after step 2.
trainer_cpu.py runs each with the torch interpreter that make setup builds
(.venv-torch: Debian's python3-torch, transformers and Lightning pinned in
jupyter/requirements-torch.txt; docs/integrations.md says why) and logs every
record_function scope and forward pass in order; the tests check what the
callback tells the agent against what the trainer really did."""
import json
import os
import subprocess

import pytest

from conftest import HERE, PKG_PARENT, torch_python

PREFIX = "vramscope."


@pytest.fixture(scope="module")
def py():
    return torch_python("transformers", "lightning")


def run_trainer(py, tmp, which):
    out = os.path.join(tmp, which + ".json")
    # The model is built from a config: nothing to fetch from a hub.
    env = dict(os.environ, PYTHONPATH=PKG_PARENT, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf"))
    res = subprocess.run([py, os.path.join(HERE, "trainer_cpu.py"), which, out], env=env, cwd=tmp,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


def replay(log):
    """Walks the log with a stack of open scopes: each exit closes the
    innermost scope (the scopes nest); returns the vramscope scopes entered
    in order, and each forward pass and optimizer step with the vramscope
    scopes open around it."""
    stack, entered, inside = [], [], []
    for kind, name in log:
        if kind == "enter":
            stack.append(name)
            if name.startswith(PREFIX):
                entered.append(name[len(PREFIX):])
            elif name.startswith("Optimizer.step#"):
                inside.append(("optimizer step", [n for n in stack[:-1] if n.startswith(PREFIX)]))
        elif kind == "exit":
            assert stack and stack[-1] == name, "%s exits while %s is innermost" % (name, stack)
            stack.pop()
        else:
            inside.append(("forward " + name, [n for n in stack if n.startswith(PREFIX)]))
    assert stack == [], "scopes left open: %s" % stack
    return entered, inside


def expected_scopes(steps=3, eval_after=2):
    names = ["epoch 0"]
    for s in range(steps):
        names += ["step %d" % s, "train step", "micro-batch", "micro-batch 1/2 done", "micro-batch",
                  "step %d done" % s]
        if s + 1 == eval_after:
            names.append("eval")
    return names


def check_common(got):
    entered, inside = replay(got["log"])
    assert entered == expected_scopes(), entered
    assert got["left_open"] == [] and got["off"] is False
    # The real profiler saw every scope the callback opened.
    assert got["profiled"] == sorted({PREFIX + n for n in entered})
    train = [scopes for what, scopes in inside if what == "forward train"]
    steps = [scopes for what, scopes in inside if what == "optimizer step"]
    # One forward per micro-batch, each inside a micro-batch of a train step.
    assert len(train) == 6
    assert all(s[-2:] == [PREFIX + "train step", PREFIX + "micro-batch"] for s in train), train
    # One optimizer step per train step, inside it.
    assert len(steps) == 3 and all(PREFIX + "train step" in s for s in steps), steps
    return inside


def test_hf_trainer(py, tmp):
    got = run_trainer(py, tmp, "hf")
    inside = check_common(got)
    evals = [scopes for what, scopes in inside if what == "forward eval"]
    # Two evaluation batches. The Trainer has no event before evaluation: the
    # end of the first batch opens the scope (hf.py), the second runs inside it.
    assert evals == [[], [PREFIX + "eval"]], evals


def test_lightning_trainer(py, tmp):
    got = run_trainer(py, tmp, "lightning")
    inside = check_common(got)
    evals = [scopes for what, scopes in inside if what == "forward eval"]
    assert evals == [[PREFIX + "eval"]] * 2, evals  # on_validation_start opens it before the first batch
