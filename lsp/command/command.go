// Package command is the one source of truth for what the language server
// does beside LSP's own methods: the commands an editor runs with
// workspace/executeCommand (each takes one object argument) and the custom
// requests (vramscope/report), their argument and result types. The language
// server dispatches by this table (lsp/execute_command.go), and
// internal/wiregen generates the extension's copy (vscode-ext/src/commands_gen.ts)
// from it, as gopls generates its commands from one Go interface.
package command

import (
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

// Command is one entry of the table.
type Command struct {
	Name    string
	Args    any    // a zero value of the argument's type (NoArgs: none)
	Result  any    // a zero value of the result's type, or a OneOf
	Example string // the argument's shape, quoted by an error about it
	Doc     string
}

// OneOf is a result that is one of several types (flameGraph: a page, or a tree).
type OneOf = api.OneOf

// The commands, as workspace/executeCommand names them.
const (
	OpenSnapshot     = "vramscope.openSnapshot"
	CompareSnapshots = "vramscope.compareSnapshots"
	TakeSnapshot     = "vramscope.takeSnapshot"
	Attach           = "vramscope.attach"
	ListProcesses    = "vramscope.listProcesses"
	ListSnapshots    = "vramscope.listSnapshots"
	FlameGraph       = "vramscope.flameGraph"
	Status           = "vramscope.status"
	TakeJobSnapshot  = "vramscope.takeJobSnapshot"
	Ranks            = "vramscope.ranks"
	ShowFitPlans     = "vramscope.showFitPlans"
)

// The custom requests, beside LSP's own methods (like rust-analyzer's lsp_ext).
const (
	Report     = "vramscope/report"
	DiffReport = "vramscope/diffReport"
)

// Commands is the table of workspace/executeCommand commands, in the order
// the server announces them (initialize's executeCommandProvider).
var Commands = []Command{
	{OpenSnapshot, OpenArgs{}, Summary{}, `{"path": "snapshot.pickle"}`,
		"Shows a snapshot file: the hints, lenses and diagnostics follow it."},
	{CompareSnapshots, CompareArgs{}, analyze.Diff{}, `{"a": "before.pickle", "b": "after.pickle"}`,
		"The per-line change from snapshot file a to b (local paths)."},
	{TakeSnapshot, TakeArgs{}, Summary{}, `{"pid": 1234, "label": "text"} (both optional)`,
		"Asks the daemon for a snapshot of pid (the only process with an agent when omitted) and shows it."},
	{Attach, AttachArgs{}, AttachResult{}, `{"pid": 1234}`,
		"Loads the agent into a running Python process (vramscope attach)."},
	{ListProcesses, NoArgs{}, api.ProcessListResult{}, `{} or nothing`,
		"The daemon's process.list."},
	{ListSnapshots, NoArgs{}, api.ListResult{}, `{} or nothing`,
		"The daemon's snapshot.list."},
	{FlameGraph, FlameArgs{}, OneOf{FlamePage{}, flame.Tree{}}, `{"file": "train.py", "function": "train_step", "weight": "peak"|"alloc", "format": "html"|"tree"} (all optional)`,
		"The shown snapshot's flame tree (local paths), rooted at a function when one is given: the tree with format \"tree\", else the linked report as a page the client is asked to open."},
	{Status, StatusArgs{}, StatusBar{}, `{"pid": 1234} (optional)`,
		"What the extension's status bar shows: the daemon, the process's memory and utilisation, the shown snapshot."},
	{TakeJobSnapshot, TakeArgs{}, RankPick{}, `{"pid": 1234, "label": "text"}`,
		"Every rank of pid's launch at once (the daemon's group.take); shows the heaviest rank."},
	{Ranks, RanksArgs{}, RankPick{}, `{"group": "GROUP-ID"}`,
		"A stored group's ranks for the rank picker, and the one shown."},
	{ShowFitPlans, FitPlansArgs{}, FitPlansPage{}, `{"file": "train.py", "line": 23}`,
		"The plans that fit of the shown snapshot's out-of-memory finding at file:line (vramscope fit), written as a Markdown page the client is asked to open."},
}

// Requests are the custom requests; their params are the Args.
var Requests = []Command{
	{Report, NoArgs{}, analyze.Report{}, `{}`,
		"The linked report's data of the shown snapshot (analyze's Result.Report, local paths), for the flame-graph webview."},
	{DiffReport, CompareArgs{}, analyze.CompareReport{}, `{"a": "before.pickle", "b": "after.pickle"}`,
		"b's report with a's timeline and the per-line diff, for the compare view's overlaid timelines."},
}

// NoArgs is the argument of a command that takes none ({}, null or nothing).
type NoArgs struct{}

// OpenArgs names a snapshot file to show.
type OpenArgs struct {
	Path string `json:"path"` // absolute, or relative to the workspace
}

// CompareArgs names two snapshot files: a before, b after.
type CompareArgs struct {
	A string `json:"a"` // the snapshot before
	B string `json:"b"` // the snapshot after
}

// TakeArgs names a process to snapshot.
type TakeArgs struct {
	PID   int    `json:"pid,omitempty"`   // the process (takeSnapshot: the only one with an agent when 0)
	Label string `json:"label,omitempty"` // free text stored with the snapshot
}

// AttachArgs names a process to load the agent into.
type AttachArgs struct {
	PID int `json:"pid"` // the process id
}

// FlameArgs selects the flame tree: its root, its weight and its form.
type FlameArgs struct {
	File     string `json:"file,omitempty"`     // the recorded file of Function
	Function string `json:"function,omitempty"` // root the tree at this function's outermost frame
	Weight   string `json:"weight,omitempty"`   // peak (default), alloc, current
	Format   string `json:"format,omitempty"`   // "html" (a page, opened; the default) or "tree" (the extension's webview)
}

// StatusArgs names the process the status bar follows.
type StatusArgs struct {
	PID int `json:"pid,omitempty"` // 0: the first process with an agent
}

// RanksArgs names a stored group.
type RanksArgs struct {
	Group string `json:"group"` // the group's ID
}

// Summary is what opening or taking a snapshot answers.
type Summary struct {
	Path      string `json:"path"`         // the snapshot file shown
	PeakBytes int64  `json:"peak_bytes"`   // its peak allocated
	Events    int64  `json:"events"`       // trace events
	Sites     int    `json:"sites"`        // lines that hold memory
	Findings  int    `json:"findings"`     // findings
	ID        string `json:"id,omitempty"` // the daemon's snapshot id
}

// AttachResult is what vramscope attach printed.
type AttachResult struct {
	Output string `json:"output"`
}

// FitPlansArgs names the recorded line of an out-of-memory finding.
type FitPlansArgs struct {
	File string `json:"file"`
	Line int    `json:"line"`
}

// FitPlansPage is what vramscope.showFitPlans answers.
type FitPlansPage struct {
	Path   string `json:"path"`   // the page written
	URI    string `json:"uri"`    // its file URI
	Opened bool   `json:"opened"` // the client agreed to open it (window/showDocument)
	Plans  int    `json:"plans"`  // how many plans it lists
}

// FlamePage is what vramscope.flameGraph answers with format "html".
type FlamePage struct {
	Path   string `json:"path"`   // the page written
	URI    string `json:"uri"`    // its file URI
	Opened bool   `json:"opened"` // the client agreed to open it (window/showDocument)
}

// StatusBar is what the extension's status bar shows.
type StatusBar struct {
	Daemon    bool   `json:"daemon"`                    // the server reaches a daemon
	Reason    string `json:"reason,omitempty"`          // why not
	PID       int    `json:"pid,omitempty"`             // the process shown
	GPUBytes  uint64 `json:"gpu_bytes,omitempty"`       // NVML's used memory of the process
	Allocated int64  `json:"torch_allocated,omitempty"` // torch.cuda.memory_allocated
	Reserved  int64  `json:"torch_reserved,omitempty"`  // torch.cuda.memory_reserved
	UtilGPU   *int   `json:"util_gpu,omitempty"`        // its GPU's utilisation, percent
	Snapshot  string `json:"snapshot,omitempty"`        // the snapshot file shown
}

// RankPick is what the rank picker offers: the group's ranks, heaviest
// marked, and which one the editor shows.
type RankPick struct {
	Group     string     `json:"group"`            // the group's ID
	Job       string     `json:"job"`              // what its ranks share
	SkewMS    float64    `json:"skew_ms"`          // the spread of their capture times
	Imbalance float64    `json:"imbalance"`        // max/median peak
	Median    int        `json:"median_rank"`      // the median rank
	Max       int        `json:"max_rank"`         // the heaviest rank
	Ranks     []RankItem `json:"ranks"`            // by rank
	Shown     int        `json:"shown"`            // the rank whose snapshot is open (-1: none of them)
	Failed    int        `json:"failed,omitempty"` // ranks that gave no snapshot
}

// RankItem is one rank in the picker.
type RankItem struct {
	Rank     int     `json:"rank"`
	Path     string  `json:"path"` // the snapshot file: vramscope.openSnapshot shows it
	ID       string  `json:"id"`   // its snapshot's ID
	Peak     int64   `json:"peak_bytes"`
	VsMedian float64 `json:"peak_vs_median"`
	Outlier  bool    `json:"outlier"`
	Device   int     `json:"device"`
	TopLine  string  `json:"top_line,omitempty"` // file:line of its top line (local path)
}
