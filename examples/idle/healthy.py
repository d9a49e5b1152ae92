"""A healthy compute-bound run: a bf16 MLP whose steps queue ahead of the GPU;
the loss is read every 100 steps. Expected: no idle finding."""
import torch

import harness


def main():
    net = torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(8192, 8192), torch.nn.GELU())]).cuda().bfloat16()
    opt = torch.optim.SGD(net.parameters(), lr=1e-5)
    x = torch.randn(4096, 8192, device="cuda", dtype=torch.bfloat16)

    def step(i, gpu):
        gpu.begin()
        loss = net(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        gpu.end()
        if i % 100 == 0:
            print("step %d loss %.4f" % (i, loss.item()), flush=True)

    harness.run("healthy", step, harness.CudaBusy(torch), torch.cuda.synchronize,
                {"workload": "MLP 8 x 8192 (bf16) batch 4096; loss printed every 100 steps"})


if __name__ == "__main__":
    main()
