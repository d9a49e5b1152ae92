"""vramscope: a GPU-memory profiler for PyTorch — the Python side.

The in-process agent records the CUDA caching allocator's history in this
process, answers the vramscope daemon's requests for snapshots and hands it an
allocator snapshot when the process runs out of GPU memory::

    import vramscope
    vramscope.attach()      # returns at once; everything else runs on a daemon thread
    vramscope.status()      # {"connected": ..., "registered": ..., "recording": ...}
    vramscope.detach()

Or start a program under ``python -m vramscope run -- CMD ARGS...`` (every
Python process of it that initialises CUDA attaches by itself), or attach to a
running one with ``python -m vramscope attach PID`` (Python 3.14+).

In a notebook, ``%load_ext vramscope`` adds the ``%%vramscope`` cell magic
(the GPU memory a cell allocates, as a flame graph) and ``%vramscope open FILE |
diff A B | snapshot | live`` (see vramscope.notebook; needs the ``notebook``
extra for the interactive widget).

The agent is stdlib only; it imports nothing from torch until the program does.
This module stays small: the bootstrap imports it in every Python process
started under ``vramscope run`` (IPython and the widgets load only with the
extension).
"""

__version__ = "0.1.0"
__all__ = ["attach", "detach", "status"]


def attach(max_entries=100_000, stacks="python", record=True, socket=None, oom=True, annotate_backward=True,
           sample=None):
    """Attach the agent to this process and return its status() at once.

    max_entries: the allocator's history ring (alloc/free events kept).
    stacks: "python" (Python frames) or "all" (also C++ frames; slower).
    record: record the allocator's history (env VRAMSCOPE_RECORD=0 turns it off too).
    socket: the daemon's Unix socket; default $VRAMSCOPE_SOCKET, then
        $XDG_RUNTIME_DIR/vramscope/daemon.sock, then ~/.cache/vramscope/daemon.sock.
    oom: take a snapshot when torch runs out of GPU memory and hand it to the daemon.
    annotate_backward: mark each loss.backward() call with its file:line so the
        daemon can attribute backward-pass memory to that line.
    sample: which optimizer steps are recorded, so that recording costs the
        training job nothing on most steps: None reads $VRAMSCOPE_SAMPLE, default
        the first 3 steps, then 2 of every 100; "off" records every step; or a dict
        / "every=N,window=K,warmup=W". A snapshot asked for between windows waits
        for the next window (see vramscope/agent/_schedule.py).

    Never blocks on the daemon: without one, the program runs on and the agent
    keeps retrying in the background. Without torch or CUDA it still registers
    (counters only) and says why. A second call while attached changes nothing.
    """
    from .agent import _agent

    return _agent.attach(max_entries=max_entries, stacks=stacks, record=record, socket=socket,
                         oom=oom, annotate_backward=annotate_backward, sample=sample)


def detach():
    """Stop the agent: close the connection, stop the recording it started, undo its hooks."""
    from .agent import _agent

    _agent.detach()


def status():
    """The agent's state as a dict: connected, socket, registered, recording, dropped, last_error, …"""
    from .agent import _agent

    return _agent.status()


def _auto_install():
    """Called by the bootstrap (vramscope/_boot/sitecustomize.py) when VRAMSCOPE_AUTO=1:
    waits, at the cost of one cheap import hook, for the program to import torch."""
    from .agent import _importhook

    def fire(torch_module):
        from .agent import _agent

        _agent.auto_attach(torch_module)

    return _importhook.install(fire)


def load_ipython_extension(ipython):
    """%load_ext vramscope: registers %%vramscope and %vramscope."""
    from .notebook import _magic

    _magic.load(ipython)


def unload_ipython_extension(ipython):
    from .notebook import _magic

    _magic.unload(ipython)
