package api

// levels.go: the agent's per-step memory levels (agent.levels), the road an
// out-of-memory snapshot's report draws (docs/road-to-oom.md).

// AgentLevels is the agent's notification of the steps it measured since its
// last one, every few seconds; the steps not sent yet also ride on
// agent.dump's answer and agent.captured (DumpResult.Levels).
const AgentLevels = "agent.levels"

// MaxLevelsSent bounds the steps of one agent.levels message (about 170
// bytes each in JSON: well under MaxMessageBytes).
const MaxLevelsSent = 3000

// StepLevel is one step of a process as the agent measured it at the step's
// end, from torch's caching allocator (host-side counters: no GPU sync).
type StepLevel struct {
	Step   int64 `json:"step"`    // the record's number in the run, 0-based (train, eval and forward steps all count)
	UnixMS int64 `json:"unix_ms"` // wall time at the step's end
	DurUS  int64 `json:"dur_us"`  // the step's duration: since the previous step's end (or the first forward call)
	// Allocated, Reserved and Peak are torch.cuda.memory_allocated and
	// memory_reserved at the step's end and max_memory_allocated since the
	// previous measured step (reset at each read); -1 when the agent did not
	// read the allocator at this step (it reads it less often than every
	// step when a read would cost more than 0.1% of a step).
	Allocated int64 `json:"allocated"`
	Reserved  int64 `json:"reserved"`
	Peak      int64 `json:"peak"`
	// Inputs are the shapes of the tensors passed to the root module in the
	// step's first call (batch × sequence, …), at most 4.
	Inputs [][]int64 `json:"inputs,omitempty"`
	// Phase: "train" (ended by an optimizer step), "eval" (a root-module call
	// without gradients in a program that makes optimizer steps), "forward"
	// (a root-module call in a program without optimizer steps).
	Phase    string `json:"phase"`
	Recorded bool   `json:"recorded,omitempty"` // the allocator's history was recording (a sampled window)
	// OOM marks the step that ran out of memory: measured at the error
	// (allocated then, the peak up to it), not at its end.
	OOM bool `json:"oom,omitempty"`
	// NVMLBytes is the daemon's join: the process's device memory NVML saw
	// nearest the step's end (0: no sample); the agent never sends it.
	NVMLBytes int64 `json:"nvml_bytes,omitempty"`
}

// LevelsParams carries steps measured by an agent, oldest first.
type LevelsParams struct {
	Device int `json:"device"` // the CUDA device measured
	// Cap is the memory the process may use: its memory-fraction cap
	// (torch.cuda.set_per_process_memory_fraction) or the device's total; 0 unknown.
	Cap     int64       `json:"cap"`
	Levels  []StepLevel `json:"levels"`
	Dropped int64       `json:"dropped,omitempty"` // steps measured but lost before sending (the queue was full), since the start
}
