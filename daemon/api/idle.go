package api

import "github.com/vramscope/vramscope/profiler/idle"

// Where the GPU idles, down to the Python line (issue #35): the agent's stack
// samples and the idle report's methods and types. The Methods table
// (api.go) lists them with the rest.
const (
	AgentStacks = "agent.stacks"
	IdleReport  = "idle.report"
)

// MaxStackFrames bounds the user frames of one stack sample; MaxStackSamples
// the samples of one agent.stacks batch (more are dropped by the agent).
const (
	MaxStackFrames  = 8
	MaxStackSamples = 2048
)

// StacksParams is one batch of stack samples, about a second of them. Frames
// and threads are interned per batch: a sample names them by index, so a
// batch stands alone (a lost batch loses nothing else).
type StacksParams struct {
	PeriodMS float64       `json:"period_ms"`         // the sampler's period
	Dropped  int           `json:"dropped,omitempty"` // samples dropped since the last batch (the sampler never blocks the job)
	CostMS   float64       `json:"cost_ms,omitempty"` // CPU time the sampler took for this batch
	Threads  []StackThread `json:"threads"`           // the threads sampled, by index
	Frames   []StackFrame  `json:"frames"`            // the user frames, by index
	Samples  []StackSample `json:"samples"`           // oldest first
}

// StackThread is one thread of the process.
type StackThread struct {
	Name string `json:"name"`
	Main bool   `json:"main,omitempty"` // the main (training) thread
}

// StackFrame is one user frame: a source line.
type StackFrame struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Func string `json:"func,omitempty"`
}

// StackSample is where one thread was at one instant.
type StackSample struct {
	TimeMS int64 `json:"t"`           // unix milliseconds
	Thread int   `json:"th"`          // index into Threads
	Stack  []int `json:"s,omitempty"` // indexes into Frames, innermost first (at most MaxStackFrames)
	// Wait is what the thread waits on, from the library frames below the
	// user's or the user line's text: dataloader, dataloader_workers, sync,
	// copy, checkpoint, logging, collective; empty: none.
	Wait string `json:"w,omitempty"`
}

// IdleParams asks why PID's GPU idled over the last WindowMS of its samples.
type IdleParams struct {
	PID      int   `json:"pid"`                 // a process whose agent sent stack samples
	WindowMS int64 `json:"window_ms,omitempty"` // default 60000
	Raw      bool  `json:"raw,omitempty"`       // also return the join's input (utilisation and samples), for recordings
}

// IdleResult is the join of a process's stack samples with its GPU's
// utilisation over a window: how much of the wall time the GPU idled, and
// the lines the training thread was on while it did, grouped into causes.
type IdleResult struct {
	PID          int     `json:"pid"`
	Device       int     `json:"device"`                   // NVML index of the GPU
	FromMS       int64   `json:"from_ms"`                  // the window's start, unix milliseconds
	ToMS         int64   `json:"to_ms"`                    // its end
	WallMS       float64 `json:"wall_ms"`                  // time covered by utilisation readings
	IdleMS       float64 `json:"idle_ms"`                  // of which the GPU did not compute
	IdleShare    float64 `json:"idle_share"`               // IdleMS / WallMS
	CopyMS       float64 `json:"copy_ms,omitempty"`        // utilization.gpu read busy while no SM was (a copy): counted idle
	Samples      int     `json:"samples"`                  // samples of the training thread in the window
	PeriodMS     float64 `json:"period_ms"`                // the agent's sampling period
	Dropped      int     `json:"dropped,omitempty"`        // samples the agent dropped
	Shared       bool    `json:"shared,omitempty"`         // other processes used the GPU: the utilisation is the device's
	SamplerCPUMS float64 `json:"sampler_cpu_ms,omitempty"` // CPU time the agent's stack sampler took since the process started
	// Headline is the finding in one line ("GPU idle 31% of 60 s: waiting for
	// the data loader at train.py:42 (24%)"); empty when the GPU was busy.
	Headline string      `json:"headline,omitempty"`
	Causes   []IdleCause `json:"causes"`         // largest first
	Note     string      `json:"note,omitempty"` // why the report is empty (no samples, no NVML)
	// Input is the join's input (utilisation and samples), with raw.
	Input *idle.Input `json:"input,omitempty"`
}

// IdleCause is one reason the GPU idled.
type IdleCause struct {
	Kind   string     `json:"kind"` // data_loader, sync, copy, checkpoint, logging, collective, python, no_samples
	Title  string     `json:"title"`
	IdleMS float64    `json:"idle_ms"`
	Share  float64    `json:"share"` // of the window's wall time
	Site   IdleSite   `json:"site"`  // the line to change
	Lines  []IdleSite `json:"lines"` // where the training thread was, largest first
	Fix    string     `json:"fix,omitempty"`
}

// IdleSite is a source line with the GPU idle time spent on it.
type IdleSite struct {
	File   string  `json:"file"`
	Line   int     `json:"line"`
	Func   string  `json:"func,omitempty"`
	IdleMS float64 `json:"idle_ms"`
	Share  float64 `json:"share"` // of the window's wall time
}
