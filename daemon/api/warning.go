package api

import "time"

// The warning before the card fills (issue #33, goal 3): the event's name and
// types. The Methods table (api.go) lists it with the rest.
const (
	EventMemoryWarning = "event.memory_warning"
)

// MemoryForecast is when a process's step peaks are projected to reach the
// memory it may use (profiler/forecast): only while they grow in a sustained
// way; process.list carries it, and the warning repeats it.
type MemoryForecast struct {
	Step           int            `json:"step"`             // the last step the projection saw
	ProjectedStep  int            `json:"projected_step"`   // the step at which the peak reaches capacity
	ProjectedTime  time.Time      `json:"projected_time"`   // when, on the daemon's clock (zero: the levels carry no times)
	StepsLeft      int            `json:"steps_left"`       // projected_step - step
	SecondsLeft    float64        `json:"seconds_left"`     // from the projection to projected_time (0: due now, or unknown when bytes_per_second is 0)
	BytesPerStep   float64        `json:"bytes_per_step"`   // the growth's rate
	BytesPerSecond float64        `json:"bytes_per_second"` // the same over the steps' mean duration (0 when the levels carry no times)
	Capacity       int64          `json:"capacity"`         // bytes the process may use: its device's, or its memory-fraction cap
	Level          int64          `json:"level"`            // the trend's step peak now
	Evidence       GrowthEvidence `json:"evidence"`         // what the trend rests on
	Warned         bool           `json:"warned"`           // a memory_warning was sent for this growth
	// ETASeconds is, in process.list's answer, the seconds from the answer
	// to projected_time (0 when that is past or unknown).
	ETASeconds float64 `json:"eta_seconds,omitempty"`
}

// GrowthEvidence is what a projection rests on: the per-window maxima of a
// series of per-step levels over a span of steps, fitted by Theil–Sen.
type GrowthEvidence struct {
	Series      string    `json:"series"`       // where the growth was found: "step peak", or "memory allocated at step end" (steadier under variable-length batches); either is projected from the step peaks' level
	FromStep    int       `json:"from_step"`    // the span's first step
	ToStep      int       `json:"to_step"`      // its last step
	Windows     int       `json:"windows"`      // windows in the span
	WindowSteps int       `json:"window_steps"` // steps per window
	Consistency float64   `json:"consistency"`  // Kendall's tau of the window maxima, -1 to 1
	ThirdSlopes []float64 `json:"third_slopes"` // bytes/step of each third of the span, oldest first
	Rise        int64     `json:"rise"`         // the trend's rise over the span, bytes
	Noise       int64     `json:"noise"`        // the maxima's robust spread around the trend, bytes
	CacheGap    int64     `json:"cache_gap"`    // reserved beyond the step peak lately: the allocator fails when reserved reaches capacity, so the peak is projected to capacity - cache_gap
}

// MemoryWarning is the payload of memory_warning: a process whose memory is
// projected to fill its device soon, sent once per growth, after the
// snapshot taken at the warning is stored (or could not be).
type MemoryWarning struct {
	PID      int            `json:"pid"`      // the process
	Forecast MemoryForecast `json:"forecast"` // the projection that warned
	// Snapshot is the one the daemon took at the warning, so that the
	// growth is named while the job still lives; SnapshotError says why
	// there is none.
	Snapshot      *SnapshotResult `json:"snapshot,omitempty"`
	SnapshotError string          `json:"snapshot_error,omitempty"`
	// Growing is the line the snapshot's analysis finds growing (a leak,
	// an accumulation in a loop, a cache that grows); nil when none.
	Growing *GrowingLine `json:"growing,omitempty"`
}

// GrowingLine is a source line whose memory grows, from a finding.
type GrowingLine struct {
	File  string `json:"file"`  // as the snapshot records it
	Line  int    `json:"line"`  // 1-based
	Bytes int64  `json:"bytes"` // what the finding says it holds
	Kind  string `json:"kind"`  // the finding's kind: memory_growth, leak, loop_accumulation, cache_growth, unbounded_cache
	Title string `json:"title"` // the finding's title
}
