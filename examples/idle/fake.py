"""drive.py --fake: the harness's phases without torch or a GPU (a sleep
stands for the GPU's work, a Python loop for the host's), to check the
plumbing (daemon, agent, sampler, vramscope idle) on any machine."""
import os
import sys
import time

import harness


class WallBusy:
    def __init__(self):
        self.ms, self.t, self.recording = 0.0, None, False

    def begin(self):
        self.t = time.perf_counter()

    def end(self):
        if self.recording:
            self.ms += 1000 * (time.perf_counter() - self.t)

    def busy_ms(self):
        return self.ms


def main():
    import vramscope  # no torch: attach by hand (auto mode waits for CUDA)

    vramscope.attach(socket=os.environ.get("VRAMSCOPE_SOCKET"))
    name = sys.argv[sys.argv.index("--name") + 1]

    def step(i, gpu):
        gpu.begin()
        time.sleep(0.004)
        gpu.end()
        s = 0
        for k in range(3000):  # host-side work
            s += k * k

    harness.MEASURE_S, harness.WARMUP_S, harness.COST_PAIRS = 4.0, 1.0, 2
    harness.run(name, step, WallBusy(), lambda: None, {"workload": "fake: sleep 4 ms, Python loop"})


if __name__ == "__main__":
    main()
