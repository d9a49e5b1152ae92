"""A Lightning ``Callback`` that names the trainer's steps, epochs,
validation and gradient-accumulation micro-batches on vramscope's timeline
(see _phases)::

    from vramscope.lightning import VramscopeCallback
    trainer = lightning.Trainer(..., callbacks=[VramscopeCallback()])

It only marks; recording is the agent's. Importing this module needs
``lightning`` (or the older ``pytorch_lightning``).
"""
try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the package before its rename
    from pytorch_lightning.callbacks import Callback

from .agent._phases import Phases


class VramscopeCallback(Callback):
    """Marks each optimizer step (accumulate_grad_batches micro-batches),
    epochs, validation and tests with record_function scopes the allocator's
    history keeps."""

    def __init__(self):
        self.phases = Phases()

    def on_train_epoch_start(self, trainer, pl_module):
        self.phases.epoch_begin(int(trainer.current_epoch))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        acc = max(1, int(getattr(trainer, "accumulate_grad_batches", 1) or 1))
        if batch_idx % acc == 0:
            self.phases.step_begin(int(trainer.global_step))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        acc = max(1, int(getattr(trainer, "accumulate_grad_batches", 1) or 1))
        done = batch_idx % acc + 1
        if done < acc:
            self.phases.micro_batch_end(done, acc)
        else:
            self.phases.step_end(int(trainer.global_step) - 1)

    def on_validation_start(self, trainer, pl_module):
        self.phases.eval_begin()

    def on_validation_end(self, trainer, pl_module):
        self.phases.eval_end()

    def on_test_start(self, trainer, pl_module):
        self.phases.eval_begin()

    def on_test_end(self, trainer, pl_module):
        self.phases.eval_end()

    def on_train_end(self, trainer, pl_module):
        self.phases.close_all()
