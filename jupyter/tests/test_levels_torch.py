"""The per-step levels (vramscope/agent/_levels.py) on real torch and a CUDA
device: root modules found by torch's global hooks, the allocator's counters
read and its peak reset per step, eval steps, the failing step, and
max_memory_allocated still the program's own peak. Skipped without torch and
a GPU (CI); run on the H200 (docs/road-to-oom.md)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from vramscope.agent import _levels, _torch  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 64)
        self.out = torch.nn.Linear(64, 1000)

    def forward(self, ids, mask=None):
        return self.out(self.emb(ids))


@pytest.fixture
def levels():
    lv, hooks = _levels.start(torch, lambda: False, lambda: torch.cuda.current_device(), _torch.register_step_hook)
    assert lv is not None
    yield lv
    handle, roots = hooks
    handle.remove()
    roots.remove()
    _levels.unwrap_peaks()


def test_steps_on_a_real_device(levels):
    torch.cuda.reset_peak_memory_stats()
    net, loss = Net().cuda(), torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    peaks = []
    for seq in (16, 16, 64):
        ids = torch.randint(0, 1000, (4, seq), device="cuda")
        out = net(ids, mask=None)
        loss(out.flatten(0, 1), ids.flatten()).backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        net(ids=torch.randint(0, 1000, (8, 32), device="cuda"))
    got = levels.drain()
    assert [e["phase"] for e in got] == ["train", "train", "train", "eval"]
    assert [e["inputs"][0] for e in got] == [[4, 16], [4, 16], [4, 64], [8, 32]]  # kwargs too
    for e in got:
        assert 0 < e["allocated"] <= e["peak"] and e["reserved"] >= e["allocated"] and e["dur_us"] > 0
        peaks.append(e["peak"])
    assert got[2]["peak"] > got[1]["peak"]  # 4x the tokens
    # the allocator's peak is reset each step; the program still sees its own
    assert torch.cuda.max_memory_allocated() >= max(peaks)
    assert torch.cuda.memory_stats()["allocated_bytes.all.peak"] < max(peaks)
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() < max(peaks)


def test_the_failing_step_is_kept(levels):
    net = Net().cuda()
    net(torch.randint(0, 1000, (2, 8), device="cuda"))
    net(torch.randint(0, 1000, (2, 8), device="cuda"))  # the first call found the root: this one is seen
    levels.on_oom()  # as the agent's out-of-memory observer calls it
    got = levels.drain()
    assert got[-1]["oom"] is True and got[-1]["inputs"] == [[2, 8]]


def test_hooks_stay_out_of_torch_compile(levels):
    """torch.compile traces the root's hooks with the module: they must not
    break its graph (dynamo cannot trace threading.get_ident or perf_counter)."""
    if not hasattr(torch, "compile") or not hasattr(torch, "compiler"):
        pytest.skip("no torch.compile")
    import warnings

    from torch._dynamo.utils import counters

    net = Net().cuda()
    torch._dynamo.reset()
    counters.clear()
    fn = torch.compile(net, backend="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            fn(torch.randint(0, 1000, (4, 16), device="cuda"))
    assert not dict(counters["graph_break"]), dict(counters["graph_break"])
    assert not [w for w in caught if "get_ident" in str(w.message) or "perf_counter" in str(w.message)]


def test_an_optimizer_in_backward_makes_one_step_per_backward(levels):
    """Per-parameter optimizers stepping in post-accumulate-grad hooks (the
    PyTorch tutorial's optimizer in backward; torchtune's optimizer_in_bwd):
    one training step per backward(), not one per parameter."""
    if not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
        pytest.skip("torch < 2.1: no post-accumulate-grad hooks")
    _torch.wrap_backward(torch)
    try:
        net, loss = Net().cuda(), torch.nn.CrossEntropyLoss()
        opts = {p: torch.optim.SGD([p], lr=0.1) for p in net.parameters()}

        def step(p):
            opts[p].step()
            opts[p].zero_grad()

        for p in net.parameters():
            p.register_post_accumulate_grad_hook(step)
        for seq in (16, 32, 64):
            ids = torch.randint(0, 1000, (4, seq), device="cuda")
            loss(net(ids).flatten(0, 1), ids.flatten()).backward()
        got = levels.drain()
    finally:
        _torch.unwrap_backward()
    assert len(opts) == 3 and [e["phase"] for e in got] == ["train"] * 3, got
    assert [e["inputs"][0] for e in got] == [[4, 16], [4, 32], [4, 64]]
