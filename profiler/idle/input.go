package idle

// Frame is one user frame of a stack sample: a source line.
type Frame struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Func string `json:"func,omitempty"`
}

// Wait is what the agent recognised a thread waiting on, from the library
// frames below the user's (or the user line's own text): "" none.
type Wait string

// The waits the agent marks (jupyter/vramscope/agent/_stacks.py decides them).
const (
	WaitNone       Wait = ""
	WaitDataLoader Wait = "dataloader"         // DataLoader.__next__ fetching in this process (num_workers=0)
	WaitWorkers    Wait = "dataloader_workers" // DataLoader.__next__ waiting on its worker processes
	WaitSync       Wait = "sync"               // .item(), .cpu(), .tolist(), .numpy(), torch.cuda.synchronize, printing a tensor
	WaitCopy       Wait = "copy"               // .to(device) / .cuda() from host memory
	WaitCheckpoint Wait = "checkpoint"         // torch.save, safetensors, torch.distributed.checkpoint
	WaitLogging    Wait = "logging"            // logging, print, TensorBoard/W&B writers
	WaitCollective Wait = "collective"         // torch.distributed collectives and barriers
)

// Sample is where one thread was at one instant.
type Sample struct {
	TimeMS int64   `json:"time_ms"` // unix milliseconds
	Thread string  `json:"thread"`  // the thread's name
	Main   bool    `json:"main"`    // the training (main) thread
	Stack  []Frame `json:"stack"`   // user frames, innermost first; empty: only library frames
	Wait   Wait    `json:"wait,omitempty"`
}

// Util is one utilisation reading of the process's GPU. A field without data
// is -1 (an idle GPU reads 0).
type Util struct {
	TimeMS   int64   `json:"time_ms"`   // unix milliseconds
	GPU      float64 `json:"gpu"`       // utilization.gpu, percent of time a kernel ran
	SMActive float64 `json:"sm_active"` // GPM SM activity, percent; -1 without GPM
	PCIeMBps float64 `json:"pcie_mbps"` // host<->device traffic, MB/s both ways; -1 none
}

// Input is everything one join reads: a process's samples and its GPU's
// utilisation, both in time order. The CLI writes it with --raw; tests read
// recorded ones from testdata.
type Input struct {
	PID      int     `json:"pid"`
	Device   int     `json:"device"`    // NVML index of the GPU
	PeriodMS float64 `json:"period_ms"` // the agent's sampling period
	Dropped  int     `json:"dropped"`   // samples the agent dropped (it never blocks the job)
	Shared   bool    `json:"shared"`    // other processes used the GPU in the window
	// SamplerCPUMS is the CPU time the agent's stack sampler took since the
	// process started (its batches' cost_ms), for what the samples cost.
	SamplerCPUMS float64  `json:"sampler_cpu_ms,omitempty"`
	Util         []Util   `json:"util"`
	Samples      []Sample `json:"samples"`
}

// Span is the part of in between fromMS and toMS (unix milliseconds): the
// readings and samples in it, so its windows lie inside the span. The
// counters report joins each phase's span.
func (in Input) Span(fromMS, toMS int64) Input {
	out := in
	out.Util, out.Samples = nil, nil
	for _, u := range in.Util {
		if u.TimeMS >= fromMS && u.TimeMS <= toMS {
			out.Util = append(out.Util, u)
		}
	}
	for _, s := range in.Samples {
		if s.TimeMS > fromMS && s.TimeMS <= toMS {
			out.Samples = append(out.Samples, s)
		}
	}
	return out
}
