"""Whether this process records the allocator's history, and on which steps:
the agent's recording state (off, pending until CUDA is up, on, failed) and
the Schedule that opens and closes the sampled windows once it is on."""
from . import _schedule, _torch
from ._common import _say, log


class Recording:
    """Set up on the training thread (torch imported, CUDA initialised); read
    by the agent's threads (status, facts) and its worker (the schedule)."""

    def __init__(self):
        self.state = "off"  # off | pending | on | failed
        self.error = None
        self.schedule = None  # _schedule.Schedule once recording started
        self.annotations = False  # record_function marks kept in the history
        self.started = False  # this agent started torch's recording (and stops it)

    def want(self):
        """torch is imported and recording is asked for: it starts when CUDA does."""
        self.state = "pending"

    def cannot_start(self, why):
        """CUDA initialisation cannot be hooked: a pending recording never starts."""
        if self.state == "pending":
            self.state = "failed"
            self.error = why

    def start(self, torch, opts, allocations):
        """Start recording as opts say (max_entries, stacks, sample), inside CUDA
        initialisation; a failure is kept and said, never raised."""
        try:
            def start(clear):
                self.annotations = _torch.start_recording(torch, opts["max_entries"], opts["stacks"], clear=clear)

            sched = _schedule.Schedule(torch, start, lambda: _torch.stop_recording(torch), opts["sample"],
                                       allocations)
            sched.begin()
            self.schedule = sched
            self.state = "on"
            self.started = True
            log.info("vramscope: recording the allocator's history (max_entries=%d, stacks=%s, %s)",
                     opts["max_entries"], opts["stacks"],
                     "every step" if not opts["sample"] else
                     "steps sampled: %(warmup)d first, then %(window)d of every %(every)d; without steps "
                     "%(window_s)g s of every %(period_s)g s" % opts["sample"])
        except Exception as e:
            self.state = "failed"
            self.error = "recording could not start: %s" % (e,)
            log.warning("vramscope: %s", self.error, exc_info=True)
            _say("record-failed", self.error)

    def end_schedule(self):
        """Unhook the optimizer steps and stop the clock (the history stays on)."""
        if self.schedule is not None:
            self.schedule.end()

    def stop(self, torch):
        """Stop the recording this agent started (torch's history off)."""
        if torch is not None and self.started and _torch.cuda_initialized(torch):
            _torch.stop_recording(torch)
            self.started = False

    def registers_as_recording(self, no_cuda):
        """RegisterParams' recording: on, or pending where CUDA can come."""
        return self.state == "on" or (self.state == "pending" and not no_cuda)

    def hook_s(self):
        """Seconds the schedule's step hook took on the training thread."""
        return self.schedule.hook_s if self.schedule is not None else 0.0

    def clock(self):
        """The schedule's clock thread, or None."""
        return self.schedule.clock if self.schedule is not None else None

    def status(self):
        return {"recording": self.state == "on", "recording_state": self.state, "annotations": self.annotations,
                "sampling": self.schedule.state() if self.schedule is not None else None}
