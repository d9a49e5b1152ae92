// Package api is the one source of truth for the daemon's JSON-RPC 2.0
// contract: every method, who calls whom, the parameter and result types, and
// the notifications. docs/api.md is generated from it (go test -update in this
// package), and the Python agent (jupyter/vramscope/_api.py) and the TypeScript
// client mirror the method names; tests check both against Methods.
//
// Framing: one JSON-RPC message per line (UTF-8 JSON followed by "\n") on a Unix
// socket, or on a loopback TCP connection that must first call daemon.hello with
// the token.
package api

import (
	"time"

	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

//go:generate go run ../../internal/wiregen/cmd/wiregen -root ../..

// Version is the API version. A client whose major version differs is refused
// by daemon.hello; minor additions keep the major.
const Version = "1.4"

// Direction says who sends a method.
type Direction string

// The directions a method can go.
const (
	ClientToDaemon Direction = "client → daemon"
	AgentToDaemon  Direction = "agent → daemon"
	DaemonToAgent  Direction = "daemon → agent"
	Notification   Direction = "daemon → subscriber (notification)"
	AgentNotice    Direction = "agent → daemon (notification)"
	ClientNotice   Direction = "client → daemon (notification)"
)

// Method is one entry of the contract.
type Method struct {
	Name   string
	Dir    Direction
	Params any // a zero value of the params type; nil for none
	Result any // a zero value of the result type, or a OneOf; nil for none (notifications)
	Doc    string
}

// Method names, as the wire spells them.
const (
	Hello            = "daemon.hello"
	Status           = "daemon.status"
	ProcessList      = "process.list"
	SnapshotTake     = "snapshot.take"
	SnapshotImport   = "snapshot.import"
	SnapshotList     = "snapshot.list"
	SnapshotGet      = "snapshot.get"
	SnapshotDelete   = "snapshot.delete"
	AnalysisSummary  = "analysis.summary"
	AnalysisSites    = "analysis.sites"
	AnalysisFlame    = "analysis.flame"
	AnalysisReport   = "analysis.report"
	AnalysisTimeline = "analysis.timeline"
	AnalysisFindings = "analysis.findings"
	AnalysisDiff     = "analysis.diff"
	AnalysisWhatIf   = "analysis.whatif"
	CountersDevices  = "counters.devices"
	CountersSeries   = "counters.series"
	Subscribe        = "events.subscribe"
	CancelRequest    = "$/cancelRequest"

	AgentRegister = "agent.register"
	AgentCaptured = "agent.captured"
	AgentTorch    = "agent.torch"
	AgentDump     = "agent.dump"

	EventAgentConnected = "event.agent_connected"
	EventAgentGone      = "event.agent_gone"
	EventSnapshotStored = "event.snapshot_stored"
	EventOOMCaptured    = "event.oom_captured"
	EventCountersTick   = "event.counters_tick"
)

// Error codes: JSON-RPC's own (-32700 … -32600) and the daemon's.
const (
	CodeParse          = -32700 // JSON-RPC: the message is not JSON (the daemon answers, then closes the connection)
	CodeInvalidRequest = -32600 // JSON-RPC: JSON, but not a request or response (a batch, a method that is not a string, …)
	CodeUnauthorized   = -32001 // TCP connection without a valid token, or another user
	CodeVersion        = -32002 // incompatible API major version
	CodeNotFound       = -32004 // no such snapshot or process
	CodeNoAgent        = -32005 // the process has no agent attached
	CodeAgentFailed    = -32006 // the agent could not dump (it died, timed out, or reported an error)
	CodeStoreFailed    = -32007 // the store could not write (disk full, permissions)
	CodeBadSnapshot    = -32008 // the file is not a readable snapshot
	CodeTooLarge       = -32009 // a message longer than its limit (MaxHelloBytes, MaxMessageBytes, MaxRegisterBytes)
	CodeBusy           = -32010 // too many TCP connections (per user or in total; a connection waiting for hello is closed for a newer one): try again, or use the Unix socket
	CodeInternal       = -32603 // a bug: the request was recovered, the daemon goes on
	CodeInvalidParams  = -32602 // JSON-RPC: the params do not fit the method
	CodeCancelled      = -32800 // the client cancelled the request ($/cancelRequest, as LSP's RequestCancelled) or closed its connection
	CodeMethodNotFound = -32601 // JSON-RPC: no such method (or one the receiver does not answer, such as a request to a client)
)

// Message size limits: bytes of one JSON-RPC message, whitespace and newlines
// inside it included. A longer message is answered with CodeTooLarge; one
// past the limit of the connection's state (before or after daemon.hello) is
// not read further and its connection is closed.
const (
	// MaxHelloBytes bounds each message on a TCP connection until daemon.hello
	// has proved the token (a hello takes about 200 bytes).
	MaxHelloBytes = 4 << 10
	// MaxMessageBytes bounds every other message but agent.register.
	MaxMessageBytes = 1 << 20
	// MaxRegisterBytes bounds agent.register, which carries the process's argv:
	// up to ARG_MAX (2 MiB with the default 8 MiB stack), which Python's JSON
	// escapes may grow to 6 bytes per byte.
	MaxRegisterBytes = 16 << 20
)

// MaxBytes is the longest message a request for method may be.
func MaxBytes(method string) int {
	if method == AgentRegister {
		return MaxRegisterBytes
	}
	return MaxMessageBytes
}

// HelloParams opens a session. Token is required on TCP connections.
type HelloParams struct {
	Client     string `json:"client"`          // "vscode", "jupyter", "cli", "agent", …
	APIVersion string `json:"api_version"`     // the client's Version
	Token      string `json:"token,omitempty"` // required on TCP: the token file's contents (beside the socket)
}

// HelloResult describes the daemon.
type HelloResult struct {
	Version    string `json:"version"`     // the daemon's build
	APIVersion string `json:"api_version"` // Version
	PID        int    `json:"pid"`         // the daemon's process id
	Host       string `json:"host"`        // the daemon's host name
}

// StatusResult is the daemon's state.
type StatusResult struct {
	HelloResult
	Started   string         `json:"started"`       // RFC 3339
	Socket    string         `json:"socket"`        // the Unix socket it listens on
	TCP       string         `json:"tcp,omitempty"` // loopback address when enabled
	DataDir   string         `json:"data_dir"`      // where the store keeps snapshots
	Agents    int            `json:"agents"`        // agents connected now
	Snapshots int            `json:"snapshots"`     // snapshots in the store
	Counters  CountersStatus `json:"counters"`      // the NVML sampler's state
}

// CountersStatus says whether NVML sampling runs and, when it does not, why
// (for example "no NVIDIA driver").
type CountersStatus struct {
	Available  bool   `json:"available"`        // NVML sampling runs
	Reason     string `json:"reason,omitempty"` // why it does not, when it does not
	Driver     string `json:"driver,omitempty"` // the NVIDIA driver's version
	Devices    int    `json:"devices"`          // GPUs NVML sees
	IntervalMS int64  `json:"interval_ms"`      // time between samples
}

// Process is one process on this host that uses the GPU or has an agent.
type Process struct {
	PID        int      `json:"pid"`                       // the process id on its host
	Agent      bool     `json:"agent"`                     // false: NVML sees it on a GPU but no agent is attached
	Host       string   `json:"host,omitempty"`            // the host name the agent reported
	Rank       int      `json:"rank"`                      // torch.distributed rank ($RANK), 0 when not distributed
	LocalRank  int      `json:"local_rank"`                // rank on this host ($LOCAL_RANK)
	WorldSize  int      `json:"world_size"`                // ranks in the job ($WORLD_SIZE), 1 when not distributed
	Argv       []string `json:"argv,omitempty"`            // the process's command line
	Python     string   `json:"python,omitempty"`          // Python's version, e.g. 3.12.3
	Torch      string   `json:"torch,omitempty"`           // torch.__version__
	CUDA       string   `json:"cuda,omitempty"`            // torch.version.cuda
	Device     int      `json:"device"`                    // CUDA device index the process uses, -1 none
	Recording  bool     `json:"recording"`                 // allocator history is being recorded
	MaxEntries int      `json:"max_entries,omitempty"`     // ring size of the recording
	Note       string   `json:"note,omitempty"`            // e.g. "no CUDA: counters only"
	GPUBytes   uint64   `json:"gpu_bytes,omitempty"`       // NVML's used memory for the pid
	Allocated  int64    `json:"torch_allocated,omitempty"` // torch.cuda.memory_allocated, from the agent's last report
	Reserved   int64    `json:"torch_reserved,omitempty"`  // torch.cuda.memory_reserved, from the agent's last report
	Connected  string   `json:"connected,omitempty"`       // RFC 3339
	Job        string   `json:"job,omitempty"`             // what ties it to the other ranks of its launch ("run:ID", "master:ADDR:PORT", "parent:PID"; "" alone): group.take captures every process of its job
	UtilGPU    *uint32  `json:"util_gpu_pct,omitempty"`    // utilization.gpu of its GPU now (NVML); absent without a reading
	IdleShare  float64  `json:"idle_share,omitempty"`      // share of the last minute its GPU idled (idle.report), with stack samples
	IdleTop    string   `json:"idle_top,omitempty"`        // the top idle cause and its line, e.g. "waiting for the data loader at data.py:12"
	// Forecast is when its memory is projected to fill its device, while
	// its step peaks grow (nil otherwise): vramscope ps's OOM ETA.
	Forecast *MemoryForecast `json:"forecast,omitempty"`
}

// ProcessListResult lists processes.
type ProcessListResult struct {
	Processes []Process `json:"processes"` // agents first, then GPU processes without one
}

// TakeParams asks the agent of PID for a snapshot and stores it.
type TakeParams struct {
	PID       int    `json:"pid"`                  // the process whose agent dumps
	Label     string `json:"label,omitempty"`      // free text stored with the snapshot
	Analyze   bool   `json:"analyze,omitempty"`    // return only once the analysis is cached
	TimeoutMS int64  `json:"timeout_ms,omitempty"` // default 120000
}

// ImportParams copies a snapshot file into the store (it is validated first).
// A relative Path is resolved against Cwd; without Cwd it is refused (the
// daemon's own working directory means nothing to the client).
type ImportParams struct {
	Path  string `json:"path"`            // the snapshot file to import
	Label string `json:"label,omitempty"` // free text stored with the snapshot
	Cwd   string `json:"cwd,omitempty"`   // the client's working directory, absolute
}

// SnapshotResult is one stored snapshot; Path is the file in the store.
type SnapshotResult struct {
	Snapshot
	Path      string `json:"path"`                 // the snapshot file in the store
	PeakBytes int64  `json:"peak_bytes,omitempty"` // the analysis's peak allocated (0: not analysed yet)
	OOMs      int    `json:"ooms,omitempty"`       // out-of-memory events the analysis found (an imported OOM too)
}

// Snapshot is a stored snapshot's metadata as the wire carries it. The store
// keeps its own on-disk record (store.Meta); the daemon converts one into the
// other, so that the disk format and the wire can change apart.
type Snapshot struct {
	ID            string    `json:"id"`                        // sortable: time then a counter, e.g. 20261129T110203.123Z-0001 (UTC)
	Created       time.Time `json:"created"`                   // when the store committed it
	Bytes         int64     `json:"bytes"`                     // size of the snapshot file
	SHA256        string    `json:"sha256"`                    // of the snapshot file, hex
	Reason        string    `json:"reason"`                    // "request", "oom", "import"
	Source        string    `json:"source,omitempty"`          // imported file name, or the agent's script
	PID           int       `json:"pid,omitempty"`             // the process it came from
	Host          string    `json:"host,omitempty"`            // that process's host
	Rank          int       `json:"rank"`                      // torch.distributed rank, 0 when not distributed
	Device        int       `json:"device"`                    // CUDA device index of the process
	Entries       int64     `json:"entries,omitempty"`         // trace entries, when the agent counted them
	Format        string    `json:"format,omitempty"`          // "vsm1" for a snapshot streamed as marshal chunks; "" a pickle
	TookMS        float64   `json:"took_ms,omitempty"`         // how long the agent took to dump it
	Phases        Phases    `json:"phases_ms,omitzero"`        // where a capture's time went; zero for an imported snapshot
	Label         string    `json:"label,omitempty"`           // free text from the caller
	Group         string    `json:"group,omitempty"`           // the group (every rank of one job, captured together) it belongs to: the Group's ID
	DeviceByNVML  bool      `json:"device_by_nvml,omitempty"`  // Device is NVML's index of the GPU, found from the agent's device UUID (else CUDA's, in the process's numbering)
	GPUBytes      uint64    `json:"gpu_bytes,omitempty"`       // what NVML saw the process use on its GPU when the snapshot was taken (0: no NVML)
	OtherGPUBytes uint64    `json:"other_gpu_bytes,omitempty"` // what NVML saw every other process use on that GPU
	OtherPIDs     string    `json:"other_pids,omitempty"`      // those other processes, comma-separated
	PodUID        string    `json:"pod_uid,omitempty"`         // the Kubernetes pod of the process, from its cgroup
	Pod           string    `json:"pod,omitempty"`             // the pod's name, from the kubelet where allowed
	Namespace     string    `json:"namespace,omitempty"`       // the pod's namespace
	Container     string    `json:"container,omitempty"`       // the process's container in the pod
}

// Phases splits a capture's time, in milliseconds.
type Phases struct {
	Wait     float64 `json:"wait"`             // the agent waiting for a sampled window
	Snapshot float64 `json:"snapshot"`         // torch's _snapshot()
	Open     float64 `json:"open,omitempty"`   // opening the daemon's stream
	Write    float64 `json:"write"`            // writing the snapshot (marshal or pickle), including the wait on the daemon's reading
	Finish   float64 `json:"finish,omitempty"` // the daemon finishing its analysis of a stream after the agent answered
}

// ListParams filters snapshot.list; zero values list everything, newest first.
type ListParams struct {
	PID   int `json:"pid,omitempty"`   // only snapshots of this process (0: all)
	Limit int `json:"limit,omitempty"` // at most this many (0: all)
}

// ListResult lists stored snapshots, newest first.
type ListResult struct {
	Snapshots []SnapshotResult `json:"snapshots"` // newest first
}

// IDParams names one stored snapshot.
type IDParams struct {
	ID string `json:"id"` // a stored snapshot's id (Snapshot.ID)
}

// Empty is the result of methods that only succeed or fail.
type Empty struct{}

// SitesParams asks for the lines of one source file that hold memory.
type SitesParams struct {
	ID   string `json:"id"`   // a stored snapshot's id
	File string `json:"file"` // as recorded, or a local path (matched by suffix)
}

// SitesResult holds one file's lines, as in analyze --json.
type SitesResult struct {
	File      string         `json:"file"`       // the file as the snapshot records it
	PeakBytes int64          `json:"peak_bytes"` // the snapshot's peak, for shares
	Sites     []analyze.Site `json:"sites"`      // its lines that hold memory, as in analyze --json
}

// FlameParams asks for a flame tree.
type FlameParams struct {
	ID           string `json:"id"`                      // a stored snapshot's id
	Weight       string `json:"weight,omitempty"`        // peak (default), alloc, current
	KeepWrappers bool   `json:"keep_wrappers,omitempty"` // keep frames of torch's own wrappers (hidden by default)
}

// TimelineParams asks for one device's memory over time.
type TimelineParams struct {
	ID     string `json:"id"`     // a stored snapshot's id
	Device int    `json:"device"` // the CUDA device index in the snapshot
}

// DiffParams compares snapshot A (before) with B (after).
type DiffParams struct {
	A string `json:"a"` // the id of the snapshot before
	B string `json:"b"` // the id of the snapshot after
}

// WhatIfParams fits the peaks of stored snapshots of one script, each at
// its size (batch size or sequence length), and predicts the largest size
// that fits. DeviceMemory 0: the total NVML reports for the first snapshot's
// device, when NVML runs. Overhead nil: 1 GiB (CUDA context, libraries).
type WhatIfParams struct {
	Snapshots    []WhatIfSnapshot `json:"snapshots"`               // at least two, each with its size
	Model        string           `json:"model,omitempty"`         // auto (default), linear, quadratic
	DeviceMemory int64            `json:"device_memory,omitempty"` // bytes the device holds (0: NVML's total for the first snapshot's device)
	Overhead     *int64           `json:"overhead,omitempty"`      // bytes outside the allocator (CUDA context, libraries); null: 1 GiB
	Predict      []float64        `json:"predict,omitempty"`       // sizes to predict the peak at
}

// WhatIfSnapshot is one stored snapshot and the size it was run at.
type WhatIfSnapshot struct {
	ID   string  `json:"id"`   // a stored snapshot's id
	Size float64 `json:"size"` // the batch size or sequence length it ran at
}

// SeriesParams asks for counters of one device (Device ≥ 0) or one process
// (PID > 0) between two times (unix milliseconds; 0 = unbounded).
type SeriesParams struct {
	Device    int   `json:"device"`               // the NVML device index
	PID       int   `json:"pid,omitempty"`        // a process instead of a device (0: the device)
	FromMS    int64 `json:"from_ms,omitempty"`    // start, unix milliseconds (0: unbounded)
	ToMS      int64 `json:"to_ms,omitempty"`      // end, unix milliseconds (0: unbounded)
	MaxPoints int   `json:"max_points,omitempty"` // default 2000
}

// CancelParams names a request of this connection whose answer the client no
// longer waits for: the daemon stops its work (an analysis no other request
// waits for stops decoding) and answers it with an error.
type CancelParams struct {
	ID any `json:"id"` // the request's JSON-RPC id, a number or a string
}

// SubscribeParams selects notifications for this connection (event.* names
// without the prefix, e.g. "snapshot_stored"; empty = all but counters_tick).
type SubscribeParams struct {
	Topics []string `json:"topics,omitempty"` // e.g. snapshot_stored, oom_captured; empty: all but counters_tick
}

// RegisterParams is what an agent says about its process.
type RegisterParams struct {
	PID       int      `json:"pid"`             // the agent's process id
	Host      string   `json:"host"`            // its host name
	Rank      int      `json:"rank"`            // torch.distributed rank ($RANK), 0 when not distributed
	LocalRank int      `json:"local_rank"`      // rank on this host ($LOCAL_RANK)
	WorldSize int      `json:"world_size"`      // ranks in the job ($WORLD_SIZE), 1 when not distributed
	Argv      []string `json:"argv"`            // the process's command line (sys.argv)
	Python    string   `json:"python"`          // Python's version, e.g. 3.12.3
	Torch     string   `json:"torch,omitempty"` // torch.__version__, once torch is imported
	CUDA      string   `json:"cuda,omitempty"`  // torch.version.cuda
	Device    int      `json:"device"`          // CUDA's index, in the process's CUDA_VISIBLE_DEVICES numbering
	// DeviceUUID is that device's UUID once CUDA is initialised: the daemon
	// reports the device by NVML's index, found from it.
	DeviceUUID string `json:"device_uuid,omitempty"`
	Recording  bool   `json:"recording"`             // allocator history is being recorded
	MaxEntries int    `json:"max_entries,omitempty"` // ring size of the recording
	Note       string `json:"note,omitempty"`        // why it is counters only
	APIVersion string `json:"api_version"`           // the agent's Version
	// JobFacts tie the process to the other ranks of its launch, for
	// group.take (agents before API 1.1 send none of them).
	JobFacts
}

// RegisterResult tells the agent where to write snapshots: files it writes go
// to IncomingDir under a name of its choosing ending in ".part", and are
// handed over with agent.captured or as the result of agent.dump.
type RegisterResult struct {
	IncomingDir string `json:"incoming_dir"` // where the agent writes snapshot files (*.part)
	APIVersion  string `json:"api_version"`  // the daemon's Version
}

// DumpParams asks an agent to write a snapshot to Path (in the incoming dir).
type DumpParams struct {
	Path string `json:"path"` // the file to write, in the incoming dir
	// Stream, when set, is a FIFO beside Path: an agent that can writes the
	// snapshot there as VSM1 (marshal chunks, profiler/marshal) while the
	// daemon analyses it and copies it to Path; one that cannot writes a
	// pickle to Path as before.
	Stream string `json:"stream,omitempty"`
}

// DumpResult is what the agent wrote.
type DumpResult struct {
	Path     string  `json:"path"`               // the file written (DumpParams.Path)
	Bytes    int64   `json:"bytes"`              // its size
	Entries  int64   `json:"entries"`            // trace entries in it
	TookMS   float64 `json:"took_ms"`            // how long the dump took
	Device   int     `json:"device"`             // the CUDA device it describes
	Streamed bool    `json:"streamed,omitempty"` // written to DumpParams.Stream as VSM1, not to Path
	// Phases: where the agent's time went (Finish is the daemon's).
	Phases Phases `json:"phases_ms,omitzero"`
	// DumpTime is when the agent read the allocator's state, for a group's skew.
	DumpTime
	// Levels are the steps the agent measured and has not sent with
	// agent.levels yet (the daemon keeps the earlier ones).
	Levels *LevelsParams `json:"levels,omitempty"`
}

// CapturedParams hands over a snapshot the agent took on its own (on OOM).
type CapturedParams struct {
	DumpResult
	Reason string  `json:"reason"`        // "oom"
	OOM    *OOMRaw `json:"oom,omitempty"` // what the out-of-memory observer saw, for reason oom
}

// OOMRaw is what the out-of-memory observer saw.
type OOMRaw struct {
	Device     int   `json:"device"`           // the CUDA device that ran out
	Requested  int64 `json:"requested"`        // bytes the failing allocation asked for
	DeviceFree int64 `json:"device_free"`      // bytes free on the device (cudaMemGetInfo)
	Allocated  int64 `json:"device_allocated"` // bytes the allocator had allocated
	Total      int64 `json:"device_total"`     // bytes the device holds
}

// TorchParams is the agent's once-a-second report of torch's own counters.
type TorchParams struct {
	TimeMS    int64 `json:"time_ms"`       // unix milliseconds
	Device    int   `json:"device"`        // the CUDA device
	Allocated int64 `json:"allocated"`     // torch.cuda.memory_allocated
	Reserved  int64 `json:"reserved"`      // torch.cuda.memory_reserved
	MaxAlloc  int64 `json:"max_allocated"` // torch.cuda.max_memory_allocated
}

// AgentEvent is the payload of agent_connected and agent_gone.
type AgentEvent struct {
	Process Process `json:"process"`          // the process the agent belongs to
	Reason  string  `json:"reason,omitempty"` // why the agent went, for agent_gone
}

// OOMEvent is the payload of oom_captured, sent once the snapshot is
// analysed: what filled the device, as far as it is named.
type OOMEvent struct {
	Snapshot SnapshotResult `json:"snapshot"`      // the stored snapshot
	OOM      *OOMRaw        `json:"oom,omitempty"` // what the out-of-memory observer saw
	// Title is the analysis's out-of-memory finding ("CUDA out of memory:
	// ... (cause: ...)"); empty when the analysis failed.
	Title string `json:"title,omitempty"`
	// NamedShare is the share of the memory alive at the failure that has a
	// name (a tensor or a user line); Named its largest named groups.
	NamedShare float64      `json:"named_share,omitempty"`
	Named      []NamedGroup `json:"named,omitempty"` // the largest named groups alive at the failure
	// Fix is the finding's fix; in generation it leads with the batch and
	// length that fit (KVCache).
	Fix     string   `json:"fix,omitempty"`
	KVCache *KVCache `json:"kv_cache,omitempty"` // the KV cache the agent named at the failure
}

// KVCache is a key/value cache at an out-of-memory error in generation:
// what it held and what would have fit the memory the process could use.
type KVCache struct {
	Bytes         int64 `json:"bytes"`
	Batch         int64 `json:"batch"`
	Tokens        int64 `json:"tokens"`          // the sequence length it held
	BytesPerToken int64 `json:"bytes_per_token"` // one token of one sequence, every layer's keys and values
	Limit         int64 `json:"limit"`           // the memory the process could use (a lower bound)
	MaxBatch      int64 `json:"max_batch"`       // the largest batch at Tokens within Limit
	MaxTokens     int64 `json:"max_tokens"`      // the longest sequence at Batch within Limit
}

// NamedGroup is one name the agent gave live tensors (the same name in
// every layer counts once: "model.transformer.h.*.mlp.c_fc.weight").
type NamedGroup struct {
	Name    string `json:"name"`    // e.g. model.transformer.h.*.mlp.c_fc.weight
	Kind    string `json:"kind"`    // parameter, buffer, gradient, optimizer_state, attribute, local, activation
	Bytes   int64  `json:"bytes"`   // bytes of the group's tensors
	Tensors int    `json:"tensors"` // how many tensors
}

// Methods is the contract, in the order docs/api.md lists it.
var Methods = []Method{
	{Hello, ClientToDaemon, HelloParams{}, HelloResult{}, "Opens a session and checks the API major version. Required first on TCP (with the token); optional on the Unix socket."},
	{Status, ClientToDaemon, nil, StatusResult{}, "The daemon's state, including whether NVML sampling runs and why not (\"no NVIDIA driver\")."},
	{ProcessList, ClientToDaemon, nil, ProcessListResult{}, "Attached agents plus GPU processes NVML sees without an agent."},
	{SnapshotTake, ClientToDaemon, TakeParams{}, SnapshotResult{}, "Asks the process's agent to dump its allocator snapshot into the store; returns once it is stored (and analysed, with analyze)."},
	{SnapshotImport, ClientToDaemon, ImportParams{}, SnapshotResult{}, "Validates a snapshot file and copies it into the store."},
	{SnapshotList, ClientToDaemon, ListParams{}, ListResult{}, "Stored snapshots, newest first."},
	{SnapshotGet, ClientToDaemon, IDParams{}, SnapshotResult{}, "One stored snapshot's metadata and path."},
	{SnapshotDelete, ClientToDaemon, IDParams{}, Empty{}, "Removes a stored snapshot and its cached analysis."},
	{AnalysisSummary, ClientToDaemon, IDParams{}, analyze.Result{}, "The full analysis, as vramscope analyze --json writes it; computed once per snapshot and cached."},
	{AnalysisSites, ClientToDaemon, SitesParams{}, SitesResult{}, "The lines of one source file that hold memory (paths matched exactly or by suffix)."},
	{AnalysisFlame, ClientToDaemon, FlameParams{}, flame.Tree{}, "The flame tree for the shared renderer, as vramscope flame --format json writes it."},
	{AnalysisReport, ClientToDaemon, IDParams{}, analyze.Report{}, "The linked report's data (as vramscope analyze --report writes it) beside the flame tree: the peak device's timeline, the live set over time by origin (moments: what a click on the timeline shows), top lines, categories, findings, allocator maps."},
	{AnalysisTimeline, ClientToDaemon, TimelineParams{}, analyze.Timeline{}, "Allocated and reserved bytes over time for one device, with step and annotation markers."},
	{AnalysisFindings, ClientToDaemon, IDParams{}, []analyze.Finding{}, "The findings (OOM, …) with evidence and fix."},
	{AnalysisDiff, ClientToDaemon, DiffParams{}, analyze.Diff{}, "Per-line change from snapshot a to snapshot b, as vramscope diff --json writes it."},
	{AnalysisWhatIf, ClientToDaemon, WhatIfParams{}, analyze.WhatIf{}, "Peak against size over several snapshots of one script (as vramscope whatif --json): the fit, its leave-one-out error, the largest size that fits."},
	{CountersDevices, ClientToDaemon, nil, DevicesResult{}, "GPUs NVML sees, the sampler's status and the latest sample of each."},
	{CountersSeries, ClientToDaemon, SeriesParams{}, OneOf{SeriesResult{}, ProcessSeriesResult{}}, "Counter samples of a device or a process over a time range, downsampled to max_points."},
	{Subscribe, ClientToDaemon, SubscribeParams{}, Empty{}, "Sends this connection the event.* notifications of the topics asked for."},
	{GroupTake, ClientToDaemon, GroupTakeParams{}, GroupResult{}, "Asks every rank of the process's job (the same torchrun run id, master address and port, or parent) for its snapshot at once and stores them as one group, with the skew of their capture times. A rank that fails is listed in failed; the call fails only when no rank gave a snapshot."},
	{GroupList, ClientToDaemon, nil, GroupListResult{}, "Stored groups, newest first."},
	{GroupGet, ClientToDaemon, IDParams{}, GroupResult{}, "One stored group and its members' snapshots."},
	{IdleReport, ClientToDaemon, IdleParams{}, IdleResult{}, "Why the process's GPU idled over a window: its stack samples joined with its GPU's utilisation, the idle share of wall time and the lines the training thread was on, grouped into causes with fixes."},
	{AnalysisRanks, ClientToDaemon, RanksParams{}, analyze.Ranks{}, "The rank view (as vramscope ranks --json) of a group: per rank peak, reserved, categories, NVML's non-PyTorch memory and top lines; the imbalance (max/median peak) and each outlier rank's per-line diff against the median rank."},
	{CancelRequest, ClientNotice, CancelParams{}, nil, "Stops a request of this connection that the client no longer waits for (as LSP's $/cancelRequest); a closed connection stops all of its requests."},
	{AgentRegister, AgentToDaemon, RegisterParams{}, RegisterResult{}, "An agent announces its process; the connection then belongs to that process until it closes."},
	{AgentCaptured, AgentToDaemon, CapturedParams{}, SnapshotResult{}, "The agent hands over a snapshot it wrote on its own (out of memory) into the incoming dir."},
	{AgentTorch, AgentNotice, TorchParams{}, nil, "torch.cuda's allocated/reserved bytes, about once a second."},
	{AgentStacks, AgentNotice, StacksParams{}, nil, "Where the process's threads were: stack samples (user frames and a wait marker) taken at 20-50 Hz, about a second of them per batch."},
	{AgentLevels, AgentNotice, LevelsParams{}, nil, "The steps the agent measured since its last agent.levels (every few seconds, at most MaxLevelsSent a message): allocated, reserved and peak bytes at each step's end, its duration and the shapes passed to the root module."},
	{AgentDump, DaemonToAgent, DumpParams{}, DumpResult{}, "The daemon asks the agent to write its snapshot to path; the agent syncs the file before answering."},
	{EventAgentConnected, Notification, AgentEvent{}, nil, "An agent registered (topic agent_connected)."},
	{EventAgentGone, Notification, AgentEvent{}, nil, "An agent's connection closed (topic agent_gone)."},
	{EventSnapshotStored, Notification, SnapshotResult{}, nil, "A snapshot was committed to the store (topic snapshot_stored)."},
	{EventOOMCaptured, Notification, OOMEvent{}, nil, "An agent captured a snapshot at an out-of-memory error (topic oom_captured)."},
	{EventCountersTick, Notification, DevicesResult{}, nil, "The latest counters, about once a second (topic counters_tick)."},
	{EventMemoryWarning, Notification, MemoryWarning{}, nil, "A process's memory is projected to fill its device soon (within max(10 min, 50 steps)); sent once per growth, after the snapshot the daemon took at the warning is stored (topic memory_warning)."},
	{EventGroupStored, Notification, GroupResult{}, nil, "A group was stored: by group.take, or after one rank's out-of-memory error captured the others (reason oom) (topic group_stored)."},
}
