set -x
ldd --version | head -1; python3 --version; nproc; free -g | head -2
python3 - <<'PY'
import torch, os, time
print("torch", torch.__version__, torch.version.cuda)
# recording before CUDA init: does it initialise CUDA?
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=1000, global_record_annotations=True)
print("initialized after record:", torch.cuda.is_initialized())
called = []
torch.cuda._lazy_call(lambda: called.append(torch.cuda.is_initialized()))
x = torch.ones(10, device="cuda")
print("lazy call ran:", called)
torch._C._cuda_attach_out_of_memory_observer(lambda *a: print("oom", a))
with torch.autograd.profiler.record_function("vramscope.backward@x.py:3"):
    y = x * 2
s = torch.cuda.memory._snapshot()
print("annotations:", [a["name"] for a in s.get("external_annotations", [])][:5])
print("entries", sum(len(t) for t in s["device_traces"]))
print("pid", os.getpid())
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
print("nvml procs", [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)])
PY
go version 2>&1 | head -1
./bin/vramscope counters --duration 2s 2>&1 | tail -30
