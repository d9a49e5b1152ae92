package api

import "time"

// Group capture and the rank view (issue #17): the methods' names and types.
// The Methods table (api.go) lists them with the rest.
const (
	GroupTake        = "group.take"
	GroupList        = "group.list"
	GroupGet         = "group.get"
	AnalysisRanks    = "analysis.ranks"
	EventGroupStored = "event.group_stored"
)

// GroupTakeParams asks for a snapshot of every rank of PID's job at once
// (every attached process whose Process.Job is PID's; PID alone when it has
// none).
type GroupTakeParams struct {
	PID       int    `json:"pid"`                  // any rank of the job
	Label     string `json:"label,omitempty"`      // free text stored with each rank's snapshot
	TimeoutMS int64  `json:"timeout_ms,omitempty"` // for each rank; default 120000
}

// Group is one capture of every rank of a job.
type Group struct {
	ID      string    `json:"id"`      // "job-" and a snapshot-like ID, sortable by time
	Created time.Time `json:"created"` // when the group was stored (UTC)
	Reason  string    `json:"reason"`  // "request", or "oom": one rank's out-of-memory error captured the others
	// Job is what the ranks share: "run:ID" (torchrun's TORCHELASTIC_RUN_ID),
	// "master:ADDR:PORT", "parent:PID", or "pid:PID" for a process alone.
	Job     string        `json:"job"`
	Label   string        `json:"label,omitempty"` // free text from the caller
	Members []GroupMember `json:"members"`         // by rank
	// SkewMS is the latest member's capture time minus the earliest's.
	SkewMS float64        `json:"skew_ms"`
	Failed []GroupFailure `json:"failed,omitempty"` // ranks asked that gave no snapshot
	// Partial: the daemon stopped before it wrote the group's record; the
	// group was assembled from its members' metadata (no skew, no failures).
	Partial bool `json:"partial,omitempty"`
}

// GroupMember is one rank's snapshot in a group.
type GroupMember struct {
	Rank       int     `json:"rank"`        // torch.distributed rank
	PID        int     `json:"pid"`         // its process
	ID         string  `json:"snapshot"`    // its snapshot's ID
	CapturedMS float64 `json:"captured_ms"` // when its allocator state was read, unix milliseconds
}

// GroupFailure is a rank that gave no snapshot.
type GroupFailure struct {
	Rank  int    `json:"rank"`  // torch.distributed rank
	PID   int    `json:"pid"`   // its process
	Error string `json:"error"` // why it gave no snapshot
}

// GroupResult is one stored group and its members' snapshots, by rank.
type GroupResult struct {
	Group
	Snapshots []SnapshotResult `json:"snapshots"` // the members' snapshots, by rank
}

// GroupListResult lists stored groups, newest first.
type GroupListResult struct {
	Groups []GroupResult `json:"groups"` // newest first
}

// RanksParams asks for the rank view of a group.
type RanksParams struct {
	Group string `json:"group"` // the group's ID
}

// JobFacts are what agent.register says about the launch the process
// belongs to (agents before API 1.1 send none of them):
// torchrun's TORCHELASTIC_RUN_ID ("none" when no --rdzv-id was given),
// MASTER_ADDR and MASTER_PORT, and the parent's pid.
type JobFacts struct {
	RunID      string `json:"run_id,omitempty"`      // $TORCHELASTIC_RUN_ID
	MasterAddr string `json:"master_addr,omitempty"` // $MASTER_ADDR
	MasterPort string `json:"master_port,omitempty"` // $MASTER_PORT
	PPID       int    `json:"ppid,omitempty"`        // the parent process's pid
}

// DumpTime is part of agent.dump's answer: when the agent read
// the allocator's state (its _snapshot() call), unix milliseconds; a
// group's skew is the spread of these. 0 (older agents): the daemon takes
// the time it asked plus the agent's wait.
type DumpTime struct {
	AtMS float64 `json:"at_ms,omitempty"` // unix milliseconds, the agent's clock
}
