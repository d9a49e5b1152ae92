"""A slow data pipeline: the batch is built in the training process
(DataLoader with num_workers=0) by a CPU transform written in Python, while a
small conv net trains on the GPU. Expected: idle, data loader, at the
transform's lines (jitter below). Run by drive.py under `vramscope run`."""
import torch
import torch.nn.functional as F

import harness


def jitter(img, k):
    """A per-row brightness jitter, one row at a time: the kind of transform
    that costs the training process its GPU."""
    rows = [row * (1.0 + 0.01 * ((k + r) % 7)) for r, row in enumerate(img.unbind(1))]
    return torch.stack(rows, 1)


class Images(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, k):
        g = torch.Generator().manual_seed(k)
        img = torch.rand(3, 96, 96, generator=g)
        img = jitter(img, k)  # expect: data_loader (the transform runs in this process)
        return img, k % 10


def main():
    torch.backends.cudnn.benchmark = True
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Images(), batch_size=64, num_workers=0, shuffle=False)
    batches = iter(loader)

    def step(i, gpu):
        x, y = next(batches)  # the main thread builds the batch here
        gpu.begin()
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        gpu.end()

    harness.run("slow_loader", step, harness.CudaBusy(torch), torch.cuda.synchronize,
                {"workload": "conv net (3 x 128 ch, 96 x 96) batch 64; DataLoader num_workers=0, Python per-row jitter"})


if __name__ == "__main__":
    main()
