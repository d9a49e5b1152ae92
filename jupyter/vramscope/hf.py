"""A Hugging Face ``transformers.TrainerCallback`` that names the trainer's
steps, epochs, evaluation and gradient-accumulation micro-batches on
vramscope's timeline (see _phases)::

    from vramscope.hf import VramscopeCallback
    trainer = Trainer(..., callbacks=[VramscopeCallback()])

It only marks; recording is the agent's (``vramscope run -- python train.py``
or ``vramscope.attach()``). Importing this module needs transformers.
"""
from transformers import TrainerCallback

from .agent._phases import Phases


class VramscopeCallback(TrainerCallback):
    """Marks each optimizer step, its accumulation micro-batches, epochs and
    evaluation with record_function scopes the allocator's history keeps."""

    def __init__(self):
        self.phases = Phases()
        self._micro = 0

    def on_epoch_begin(self, args, state, control, **kw):
        self.phases.epoch_begin(int(state.epoch or 0))

    def on_step_begin(self, args, state, control, **kw):
        self._micro = 0
        self.phases.step_begin(state.global_step)

    def on_substep_end(self, args, state, control, **kw):
        # After each micro-batch of an accumulation step but the last (the
        # last one's end is on_step_end, after the optimizer step; checked
        # against transformers 5.23's Trainer._inner_training_loop).
        self._micro += 1
        self.phases.micro_batch_end(self._micro, max(1, int(args.gradient_accumulation_steps)))

    def on_step_end(self, args, state, control, **kw):
        self.phases.step_end(state.global_step - 1)

    def on_prediction_step(self, args, state, control, **kw):
        # Evaluation has no begin event: the end of its first batch opens the
        # scope, so that batch's own allocations fall before it.
        self.phases.eval_begin()

    def on_evaluate(self, args, state, control, **kw):
        self.phases.eval_end()

    def on_predict(self, args, state, control, **kw):
        self.phases.eval_end()

    def on_train_end(self, args, state, control, **kw):
        self.phases.close_all()
