"""A periodic checkpoint save on the training thread: a 2.1 GB model trains
compute-bound and torch.save writes its state every 2.5 s. Expected: idle,
checkpoint save, at the torch.save line."""
import os
import tempfile
import time

import torch

import harness

SAVE_EVERY_S = 2.5


def main():
    torch.backends.cuda.matmul.allow_tf32 = True
    net = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192, bias=False) for _ in range(8)]).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    x = torch.randn(1024, 8192, device="cuda")
    path = os.path.join(tempfile.mkdtemp(prefix="idle-ckpt-"), "model.pt")
    last = [time.perf_counter()]
    saves = [0]

    def train(gpu):
        gpu.begin()
        loss = net(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        gpu.end()

    def step(i, gpu):
        train(gpu)
        if time.perf_counter() - last[0] >= SAVE_EVERY_S:
            torch.save(net.state_dict(), path)  # expect: checkpoint (2.1 GB copied to the host and written)
            saves[0] += 1
            last[0] = time.perf_counter()

    facts = {"workload": "8 x Linear(8192, 8192) fp32 (2.1 GB), batch 1024; torch.save of the state every %.1f s "
                         "(the cost blocks time the training step alone)" % SAVE_EVERY_S}
    harness.run("checkpoint", step, harness.CudaBusy(torch), torch.cuda.synchronize, facts,
                cost_step=lambda i, gpu: train(gpu), extra=lambda: {"saves_all_phases": saves[0]})


if __name__ == "__main__":
    main()
