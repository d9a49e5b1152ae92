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
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// Version is the API version. A client whose major version differs is refused
// by daemon.hello; minor additions keep the major.
const Version = "1.0"

// Direction says who sends a method.
type Direction string

// The directions a method can go.
const (
	ClientToDaemon Direction = "client → daemon"
	AgentToDaemon  Direction = "agent → daemon"
	DaemonToAgent  Direction = "daemon → agent"
	Notification   Direction = "daemon → subscriber (notification)"
	AgentNotice    Direction = "agent → daemon (notification)"
)

// Method is one entry of the contract.
type Method struct {
	Name   string
	Dir    Direction
	Params any // a zero value of the params type; nil for none
	Result any // a zero value of the result type; nil for none (notifications)
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
	AnalysisTimeline = "analysis.timeline"
	AnalysisFindings = "analysis.findings"
	AnalysisDiff     = "analysis.diff"
	AnalysisWhatIf   = "analysis.whatif"
	CountersDevices  = "counters.devices"
	CountersSeries   = "counters.series"
	Subscribe        = "events.subscribe"

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
	CodeBusy           = -32010 // too many TCP connections (per peer address or in total): try again later, or use the Unix socket
	CodeInternal       = -32603 // a bug: the request was recovered, the daemon goes on
	CodeInvalidParams  = -32602 // JSON-RPC: the params do not fit the method
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
	Client     string `json:"client"`      // "vscode", "jupyter", "cli", "agent", …
	APIVersion string `json:"api_version"` // the client's Version
	Token      string `json:"token,omitempty"`
}

// HelloResult describes the daemon.
type HelloResult struct {
	Version    string `json:"version"`     // the daemon's build
	APIVersion string `json:"api_version"` // Version
	PID        int    `json:"pid"`
	Host       string `json:"host"`
}

// StatusResult is the daemon's state.
type StatusResult struct {
	HelloResult
	Started   string         `json:"started"` // RFC 3339
	Socket    string         `json:"socket"`
	TCP       string         `json:"tcp,omitempty"` // loopback address when enabled
	DataDir   string         `json:"data_dir"`
	Agents    int            `json:"agents"`
	Snapshots int            `json:"snapshots"`
	Counters  CountersStatus `json:"counters"`
}

// CountersStatus says whether NVML sampling runs and, when it does not, why
// (for example "no NVIDIA driver").
type CountersStatus struct {
	Available  bool   `json:"available"`
	Reason     string `json:"reason,omitempty"`
	Driver     string `json:"driver,omitempty"`
	Devices    int    `json:"devices"`
	IntervalMS int64  `json:"interval_ms"`
}

// Process is one process on this host that uses the GPU or has an agent.
type Process struct {
	PID        int      `json:"pid"`
	Agent      bool     `json:"agent"` // false: NVML sees it on a GPU but no agent is attached
	Host       string   `json:"host,omitempty"`
	Rank       int      `json:"rank"`
	LocalRank  int      `json:"local_rank"`
	WorldSize  int      `json:"world_size"`
	Argv       []string `json:"argv,omitempty"`
	Python     string   `json:"python,omitempty"`
	Torch      string   `json:"torch,omitempty"`
	CUDA       string   `json:"cuda,omitempty"`
	Device     int      `json:"device"`                // CUDA device index the process uses, -1 none
	Recording  bool     `json:"recording"`             // allocator history is being recorded
	MaxEntries int      `json:"max_entries,omitempty"` // ring size of the recording
	Note       string   `json:"note,omitempty"`        // e.g. "no CUDA: counters only"
	GPUBytes   uint64   `json:"gpu_bytes,omitempty"`   // NVML's used memory for the pid
	Allocated  int64    `json:"torch_allocated,omitempty"`
	Reserved   int64    `json:"torch_reserved,omitempty"`
	Connected  string   `json:"connected,omitempty"` // RFC 3339
}

// ProcessListResult lists processes.
type ProcessListResult struct {
	Processes []Process `json:"processes"`
}

// TakeParams asks the agent of PID for a snapshot and stores it.
type TakeParams struct {
	PID       int    `json:"pid"`
	Label     string `json:"label,omitempty"`
	Analyze   bool   `json:"analyze,omitempty"`    // return only once the analysis is cached
	TimeoutMS int64  `json:"timeout_ms,omitempty"` // default 120000
}

// ImportParams copies a snapshot file into the store (it is validated first).
// A relative Path is resolved against Cwd; without Cwd it is refused (the
// daemon's own working directory means nothing to the client).
type ImportParams struct {
	Path  string `json:"path"`
	Label string `json:"label,omitempty"`
	Cwd   string `json:"cwd,omitempty"` // the client's working directory, absolute
}

// SnapshotResult is one stored snapshot; Path is the file in the store.
type SnapshotResult struct {
	store.Meta
	Path string `json:"path"`
}

// ListParams filters snapshot.list; zero values list everything, newest first.
type ListParams struct {
	PID   int `json:"pid,omitempty"`
	Limit int `json:"limit,omitempty"`
}

// ListResult lists stored snapshots, newest first.
type ListResult struct {
	Snapshots []SnapshotResult `json:"snapshots"`
}

// IDParams names one stored snapshot.
type IDParams struct {
	ID string `json:"id"`
}

// Empty is the result of methods that only succeed or fail.
type Empty struct{}

// SitesParams asks for the lines of one source file that hold memory.
type SitesParams struct {
	ID   string `json:"id"`
	File string `json:"file"` // as recorded, or a local path (matched by suffix)
}

// SitesResult holds one file's lines, as in analyze --json.
type SitesResult struct {
	File      string         `json:"file"`
	PeakBytes int64          `json:"peak_bytes"` // the snapshot's peak, for shares
	Sites     []analyze.Site `json:"sites"`
}

// FlameParams asks for a flame tree.
type FlameParams struct {
	ID           string `json:"id"`
	Weight       string `json:"weight,omitempty"` // peak (default), alloc, current
	KeepWrappers bool   `json:"keep_wrappers,omitempty"`
}

// TimelineParams asks for one device's memory over time.
type TimelineParams struct {
	ID     string `json:"id"`
	Device int    `json:"device"`
}

// DiffParams compares snapshot A (before) with B (after).
type DiffParams struct {
	A string `json:"a"`
	B string `json:"b"`
}

// WhatIfParams fits the peaks of stored snapshots of one script, each at
// its size (batch size or sequence length), and predicts the largest size
// that fits. DeviceMemory 0: the total NVML reports for the first snapshot's
// device, when NVML runs. Overhead nil: 1 GiB (CUDA context, libraries).
type WhatIfParams struct {
	Snapshots    []WhatIfSnapshot `json:"snapshots"`
	Model        string           `json:"model,omitempty"` // auto (default), linear, quadratic
	DeviceMemory int64            `json:"device_memory,omitempty"`
	Overhead     *int64           `json:"overhead,omitempty"`
	Predict      []float64        `json:"predict,omitempty"`
}

// WhatIfSnapshot is one stored snapshot and the size it was run at.
type WhatIfSnapshot struct {
	ID   string  `json:"id"`
	Size float64 `json:"size"`
}

// SeriesParams asks for counters of one device (Device ≥ 0) or one process
// (PID > 0) between two times (unix milliseconds; 0 = unbounded).
type SeriesParams struct {
	Device    int   `json:"device"`
	PID       int   `json:"pid,omitempty"`
	FromMS    int64 `json:"from_ms,omitempty"`
	ToMS      int64 `json:"to_ms,omitempty"`
	MaxPoints int   `json:"max_points,omitempty"` // default 2000
}

// SeriesResult holds samples (counters.DeviceSample or counters.ProcessSample).
type SeriesResult struct {
	Device  int `json:"device"`
	PID     int `json:"pid,omitempty"`
	Samples any `json:"samples"`
}

// DevicesResult lists the GPUs NVML sees and the sampler's state.
type DevicesResult struct {
	Status  CountersStatus `json:"status"`
	Devices any            `json:"devices"` // []counters.DeviceInfo
	Latest  any            `json:"latest"`  // []counters.DeviceSample
	Phases  any            `json:"phases"`  // []gpuphase.Phase: what each GPU does now (its last few seconds classified)
}

// SubscribeParams selects notifications for this connection (event.* names
// without the prefix, e.g. "snapshot_stored"; empty = all but counters_tick).
type SubscribeParams struct {
	Topics []string `json:"topics,omitempty"`
}

// RegisterParams is what an agent says about its process.
type RegisterParams struct {
	PID       int      `json:"pid"`
	Host      string   `json:"host"`
	Rank      int      `json:"rank"`
	LocalRank int      `json:"local_rank"`
	WorldSize int      `json:"world_size"`
	Argv      []string `json:"argv"`
	Python    string   `json:"python"`
	Torch     string   `json:"torch,omitempty"`
	CUDA      string   `json:"cuda,omitempty"`
	Device    int      `json:"device"` // CUDA's index, in the process's CUDA_VISIBLE_DEVICES numbering
	// DeviceUUID is that device's UUID once CUDA is initialised: the daemon
	// reports the device by NVML's index, found from it.
	DeviceUUID string `json:"device_uuid,omitempty"`
	Recording  bool   `json:"recording"`
	MaxEntries int    `json:"max_entries,omitempty"`
	Note       string `json:"note,omitempty"` // why it is counters only
	APIVersion string `json:"api_version"`
}

// RegisterResult tells the agent where to write snapshots: files it writes go
// to IncomingDir under a name of its choosing ending in ".part", and are
// handed over with agent.captured or as the result of agent.dump.
type RegisterResult struct {
	IncomingDir string `json:"incoming_dir"`
	APIVersion  string `json:"api_version"`
}

// DumpParams asks an agent to write a snapshot to Path (in the incoming dir).
type DumpParams struct {
	Path string `json:"path"`
	// Stream, when set, is a FIFO beside Path: an agent that can writes the
	// snapshot there as VSM1 (marshal chunks, profiler/marshal) while the
	// daemon analyses it and copies it to Path; one that cannot writes a
	// pickle to Path as before.
	Stream string `json:"stream,omitempty"`
}

// DumpResult is what the agent wrote.
type DumpResult struct {
	Path     string  `json:"path"`
	Bytes    int64   `json:"bytes"`
	Entries  int64   `json:"entries"`
	TookMS   float64 `json:"took_ms"`
	Device   int     `json:"device"`
	Streamed bool    `json:"streamed,omitempty"` // written to DumpParams.Stream as VSM1, not to Path
	// Phases: where the agent's time went (store.Phases; Finish is the daemon's).
	Phases store.Phases `json:"phases_ms,omitzero"`
}

// CapturedParams hands over a snapshot the agent took on its own (on OOM).
type CapturedParams struct {
	DumpResult
	Reason string  `json:"reason"` // "oom"
	OOM    *OOMRaw `json:"oom,omitempty"`
}

// OOMRaw is what the out-of-memory observer saw.
type OOMRaw struct {
	Device     int   `json:"device"`
	Requested  int64 `json:"requested"` // bytes the failing allocation asked for
	DeviceFree int64 `json:"device_free"`
	Allocated  int64 `json:"device_allocated"`
	Total      int64 `json:"device_total"`
}

// TorchParams is the agent's once-a-second report of torch's own counters.
type TorchParams struct {
	TimeMS    int64 `json:"time_ms"`
	Device    int   `json:"device"`
	Allocated int64 `json:"allocated"`
	Reserved  int64 `json:"reserved"`
	MaxAlloc  int64 `json:"max_allocated"`
}

// AgentEvent is the payload of agent_connected and agent_gone.
type AgentEvent struct {
	Process Process `json:"process"`
	Reason  string  `json:"reason,omitempty"`
}

// OOMEvent is the payload of oom_captured, sent once the snapshot is
// analysed: what filled the device, as far as it is named.
type OOMEvent struct {
	Snapshot SnapshotResult `json:"snapshot"`
	OOM      *OOMRaw        `json:"oom,omitempty"`
	// Title is the analysis's out-of-memory finding ("CUDA out of memory:
	// ... (cause: ...)"); empty when the analysis failed.
	Title string `json:"title,omitempty"`
	// NamedShare is the share of the memory alive at the failure that has a
	// name (a tensor or a user line); Named its largest named groups.
	NamedShare float64      `json:"named_share,omitempty"`
	Named      []NamedGroup `json:"named,omitempty"`
}

// NamedGroup is one name the agent gave live tensors (the same name in
// every layer counts once: "model.transformer.h.*.mlp.c_fc.weight").
type NamedGroup struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"` // parameter, buffer, gradient, optimizer_state, attribute, local, activation
	Bytes   int64  `json:"bytes"`
	Tensors int    `json:"tensors"`
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
	{AnalysisSummary, ClientToDaemon, IDParams{}, "analyze.Result (as vramscope analyze --json)", "The full analysis; computed once per snapshot and cached."},
	{AnalysisSites, ClientToDaemon, SitesParams{}, SitesResult{}, "The lines of one source file that hold memory (paths matched exactly or by suffix)."},
	{AnalysisFlame, ClientToDaemon, FlameParams{}, "flame.Tree (as vramscope flame --format json)", "The flame tree for the shared renderer."},
	{AnalysisTimeline, ClientToDaemon, TimelineParams{}, "analyze.Timeline", "Allocated and reserved bytes over time for one device, with step and annotation markers."},
	{AnalysisFindings, ClientToDaemon, IDParams{}, "[]analyze.Finding", "The findings (OOM, …) with evidence and fix."},
	{AnalysisDiff, ClientToDaemon, DiffParams{}, "analyze.Diff (as vramscope diff --json)", "Per-line change from snapshot a to snapshot b."},
	{AnalysisWhatIf, ClientToDaemon, WhatIfParams{}, "analyze.WhatIf (as vramscope whatif --json)", "Peak against size over several snapshots of one script: the fit, its leave-one-out error, the largest size that fits."},
	{CountersDevices, ClientToDaemon, nil, DevicesResult{}, "GPUs NVML sees, the sampler's status and the latest sample of each."},
	{CountersSeries, ClientToDaemon, SeriesParams{}, SeriesResult{}, "Counter samples of a device or a process over a time range, downsampled to max_points."},
	{Subscribe, ClientToDaemon, SubscribeParams{}, Empty{}, "Sends this connection the event.* notifications of the topics asked for."},
	{AgentRegister, AgentToDaemon, RegisterParams{}, RegisterResult{}, "An agent announces its process; the connection then belongs to that process until it closes."},
	{AgentCaptured, AgentToDaemon, CapturedParams{}, SnapshotResult{}, "The agent hands over a snapshot it wrote on its own (out of memory) into the incoming dir."},
	{AgentTorch, AgentNotice, TorchParams{}, nil, "torch.cuda's allocated/reserved bytes, about once a second."},
	{AgentDump, DaemonToAgent, DumpParams{}, DumpResult{}, "The daemon asks the agent to write its snapshot to path; the agent syncs the file before answering."},
	{EventAgentConnected, Notification, AgentEvent{}, nil, "An agent registered (topic agent_connected)."},
	{EventAgentGone, Notification, AgentEvent{}, nil, "An agent's connection closed (topic agent_gone)."},
	{EventSnapshotStored, Notification, SnapshotResult{}, nil, "A snapshot was committed to the store (topic snapshot_stored)."},
	{EventOOMCaptured, Notification, OOMEvent{}, nil, "An agent captured a snapshot at an out-of-memory error (topic oom_captured)."},
	{EventCountersTick, Notification, DevicesResult{}, nil, "The latest counters, about once a second (topic counters_tick)."},
}
