"""The trainer callbacks' common part (vramscope.agent._phases): a training loop of
3 optimizer steps of 2 accumulated micro-batches each and an evaluation,
marked as vramscope.hf and vramscope.lightning mark it, in a child with the
fake torch recording its allocator's history with annotations; the real
engine then reads the trainer's words on the timeline. The callbacks
themselves run in the real transformers and Lightning trainers on CPU in
test_trainers.py, and on the GPU machine with the agent recording
(docs/gpu/integrations/README.md)."""
import json
import os
import subprocess
import sys

from conftest import FAKETORCH, PKG_PARENT, ROOT

LOOP = r"""
import pickle, sys, torch
from vramscope.agent import _torch
from vramscope.agent._phases import Phases

torch.cuda.init()
_torch.start_recording(torch, 10000, "python")
alloc, free = torch.cuda.memory._fake_alloc, torch.cuda.memory._fake_free
p = Phases()
kept = []
p.epoch_begin(0)
for step in range(3):
    p.step_begin(step)
    for micro in range(2):
        a = alloc(1 << 20)
        free(a)
        if micro == 0:
            p.micro_batch_end(1, 2)
    p.step_end(step)
p.eval_begin()
free(alloc(4 << 20))
p.eval_end()
p.close_all()
with open(sys.argv[1], "wb") as f:
    pickle.dump(torch.cuda.memory._snapshot(), f)
print(torch.autograd.profiler._stack)
"""


def test_trainer_words_on_the_timeline(tmp):
    snap = os.path.join(tmp, "loop.pickle")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKETORCH, PKG_PARENT]))
    out = subprocess.run([sys.executable, "-c", LOOP, snap], env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout  # every scope closed
    res = json.loads(subprocess.run([os.path.join(ROOT, "bin", "vramscope"), "analyze", "--json", snap],
                                    check=True, capture_output=True, text=True).stdout)
    markers = res["devices"][0]["timeline"]["markers"]
    starts = [m["name"] for m in markers if m["kind"] == "start"]
    assert starts == ["vramscope.epoch 0",
                      "vramscope.step 0", "vramscope.train step", "vramscope.micro-batch",
                      "vramscope.micro-batch 1/2 done", "vramscope.micro-batch", "vramscope.step 0 done",
                      "vramscope.step 1", "vramscope.train step", "vramscope.micro-batch",
                      "vramscope.micro-batch 1/2 done", "vramscope.micro-batch", "vramscope.step 1 done",
                      "vramscope.step 2", "vramscope.train step", "vramscope.micro-batch",
                      "vramscope.micro-batch 1/2 done", "vramscope.micro-batch", "vramscope.step 2 done",
                      "vramscope.eval"], starts
    ends = [m["name"] for m in markers if m["kind"] == "end"]
    assert len(ends) == len(starts)  # every scope ends, in the recorded history too
    assert res["annotations"] == 2 * len(starts)


def test_without_torch_it_does_nothing():
    """No torch: the phases are off, the loop runs on."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from vramscope.agent._phases import Phases\n"
            "p = Phases(); p.step_begin(0); p.micro_batch_end(1, 2); p.step_end(0); p.eval_begin(); p.eval_end()\n"
            "print(p.off, p._open)")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PKG_PARENT),
                         check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "True []"
