"""A per-step .item() in a tight loop: every step reads the loss on the host,
then does Python-side bookkeeping with it, so the GPU's queue is empty while
Python runs. Expected: idle, host-device sync, at the .item() line."""
import torch

import harness


def main():
    torch.backends.cuda.matmul.allow_tf32 = True
    net = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(2048, 2048), torch.nn.GELU())]).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    x = torch.randn(8192, 2048, device="cuda")
    history = []

    def step(i, gpu):
        gpu.begin()
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        gpu.end()
        v = loss.item()  # expect: sync (every step waits for the GPU, which then waits for the lines below)
        history.append(v)
        recent = history[-5000:]
        mean = sum(recent) / len(recent)
        spread = sum((h - mean) ** 2 for h in recent) / len(recent)  # Python-side work on every step
        if spread > 1e9:
            print("diverging", mean)

    harness.run("item_sync", step, harness.CudaBusy(torch), torch.cuda.synchronize,
                {"workload": "MLP 6 x 2048 (tf32) batch 8192; loss.item() and a Python mean/variance of the last 5000 losses every step"})


if __name__ == "__main__":
    main()
