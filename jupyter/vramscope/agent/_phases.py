"""The trainer's words on the allocator's timeline: what vramscope.hf and
vramscope.lightning call on each trainer event.

A trainer knows what vramscope otherwise guesses: where a step begins and
ends, which micro-batch of a gradient-accumulation step runs, when
evaluation runs, which epoch it is. It says so with torch's
record_function scopes, which the allocator's history keeps as
external_annotations (recorded while the agent records, with
global_record_annotations); the engine draws them on the timeline and names
the allocations made inside a scope without a Python frame (backward's) by
it. The scopes that hold allocations have fixed names ("vramscope.train
step", "vramscope.eval"), so that every step's allocations add up on one
line; numbers (epoch, step, micro-batch) go in markers: a scope opened and
closed at once.

Never raises into the training loop: a torch without record_function (or a
failing one) leaves the timeline without the trainer's words.
"""
from ._common import log

PREFIX = "vramscope."
TRAIN_STEP = PREFIX + "train step"
MICRO_BATCH = PREFIX + "micro-batch"
EVAL = PREFIX + "eval"


class Phases:
    """Open scopes by name, closed in reverse order of opening."""

    def __init__(self, torch=None):
        self._torch = torch
        self._rf = None
        self._open = []  # [(name, scope)], innermost last
        self.off = False

    def _record_function(self):
        if self._rf is None and not self.off:
            try:
                torch = self._torch
                if torch is None:
                    import torch
                self._rf = torch.autograd.profiler.record_function
            except Exception:
                log.info("vramscope: no torch record_function: the trainer's phases are not recorded", exc_info=True)
                self.off = True
        return self._rf

    def begin(self, name):
        """Open scope name, once: a second begin of an open name does nothing."""
        if any(n == name for n, _ in self._open):
            return
        rf = self._record_function()
        if rf is None:
            return
        try:
            scope = rf(name)
            scope.__enter__()
        except Exception:
            log.debug("vramscope: record_function(%r) failed", name, exc_info=True)
            return
        self._open.append((name, scope))

    def end(self, name):
        """Close scope name and every scope opened inside it."""
        if not any(n == name for n, _ in self._open):
            return
        while self._open:
            n, scope = self._open.pop()
            try:
                scope.__exit__(None, None, None)
            except Exception:
                log.debug("vramscope: closing %r failed", n, exc_info=True)
            if n == name:
                return

    def mark(self, text):
        """A marker on the timeline: a scope opened and closed at once."""
        self.begin(PREFIX + text)
        self.end(PREFIX + text)

    def is_open(self, name):
        return any(n == name for n, _ in self._open)

    def close_all(self):
        while self._open:
            self.end(self._open[-1][0])

    # The events both trainers have, in the trainer's numbering.

    def epoch_begin(self, epoch):
        self.mark("epoch %d" % epoch)

    def step_begin(self, step):
        """Optimizer step `step` (0-based: the steps done before it) begins."""
        self.end(TRAIN_STEP)
        self.mark("step %d" % step)
        self.begin(TRAIN_STEP)
        self.begin(MICRO_BATCH)

    def micro_batch_end(self, index, of):
        """Micro-batch `index` (1-based) of `of` ended: a gradient-accumulation
        boundary, when the optimizer does not step yet."""
        self.end(MICRO_BATCH)
        self.mark("micro-batch %d/%d done" % (index, of))
        self.begin(MICRO_BATCH)

    def step_end(self, step):
        self.end(TRAIN_STEP)
        self.mark("step %d done" % step)

    def eval_begin(self):
        self.begin(EVAL)

    def eval_end(self):
        self.end(EVAL)
