package store

import "time"

// Meta describes one stored snapshot. It is written beside the snapshot as
// <id>.json, and that write (a rename) is the moment the snapshot exists: a
// snapshot without its meta file was never completed and is removed at open.
type Meta struct {
	ID      string    `json:"id"`                // sortable: time then a counter, e.g. 20261129T110203.123Z-0001 (UTC)
	Created time.Time `json:"created"`           // when the store committed it
	Bytes   int64     `json:"bytes"`             // size of the pickle
	SHA256  string    `json:"sha256"`            // of the pickle, checked by Verify
	Reason  string    `json:"reason"`            // "request", "oom", "import"
	Source  string    `json:"source,omitempty"`  // imported file name, or the agent's script
	PID     int       `json:"pid,omitempty"`     // the process it came from
	Host    string    `json:"host,omitempty"`    // that process's host
	Rank    int       `json:"rank"`              // torch.distributed rank, 0 when not distributed
	Device  int       `json:"device"`            // CUDA device index of the process
	Entries int64     `json:"entries,omitempty"` // trace entries, when the agent counted them
	Format  string    `json:"format,omitempty"`  // "vsm1" for a snapshot streamed as marshal chunks; "" a pickle
	TookMS  float64   `json:"took_ms,omitempty"` // how long the agent took to dump it
	// Where a capture's time went (agent.dump's phases, and the daemon's
	// commit after it): zero for an imported snapshot.
	Phases Phases `json:"phases_ms,omitzero"`
	Label  string `json:"label,omitempty"` // free text from the caller
	// Group is the group (every rank of one job, captured together) this
	// snapshot belongs to: its ID, see Group.
	Group string `json:"group,omitempty"`
	// DeviceByNVML: Device is NVML's index of the GPU, found from the UUID the
	// agent reported (else it is CUDA's, in the process's numbering).
	DeviceByNVML bool `json:"device_by_nvml,omitempty"`
	// What NVML saw on the process's GPU when the snapshot was taken (0: no
	// NVML): the process's own memory, and that of every other process.
	GPUBytes      uint64 `json:"gpu_bytes,omitempty"`
	OtherGPUBytes uint64 `json:"other_gpu_bytes,omitempty"`
	OtherPIDs     string `json:"other_pids,omitempty"` // comma-separated (Meta stays comparable)
	// The Kubernetes pod and container of the process, when it ran in one:
	// the UID from its cgroup, the names from the kubelet where allowed.
	PodUID    string `json:"pod_uid,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Container string `json:"container,omitempty"`
}

// Phases splits a capture's time, in milliseconds: the agent waiting for a
// sampled window, torch's _snapshot(), opening the daemon's stream, writing
// the snapshot (marshal or pickle, and the wait on the daemon's reading), and
// the daemon finishing its analysis of a stream after the agent answered.
type Phases struct {
	Wait     float64 `json:"wait"`
	Snapshot float64 `json:"snapshot"`
	Open     float64 `json:"open,omitempty"`
	Write    float64 `json:"write"`
	Finish   float64 `json:"finish,omitempty"`
}
