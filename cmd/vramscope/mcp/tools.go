package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler"
)

// The tools' inputs: their fields' descriptions are what the model reads.
type (
	noInput     struct{}
	snapshotsIn struct {
		PID   int `json:"pid,omitempty" jsonschema:"only snapshots of this process"`
		Limit int `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 20)"`
	}
	takeIn struct {
		PID   int    `json:"pid" jsonschema:"the process to snapshot (list_processes)"`
		Label string `json:"label,omitempty" jsonschema:"a note stored with the snapshot"`
	}
	analyzeIn struct {
		Snapshot string `json:"snapshot" jsonschema:"a snapshot file's path or a stored snapshot's id"`
		Detail   string `json:"detail,omitempty" jsonschema:"summary (default), lines, findings, tensors, steps, categories, stacks or allocator"`
		Top      int    `json:"top,omitempty" jsonschema:"how many lines, tensors or steps to list (default 10, at most 50)"`
	}
	diffIn struct {
		Before string `json:"before" jsonschema:"the snapshot before: a file's path or a stored id"`
		After  string `json:"after" jsonschema:"the snapshot after: a file's path or a stored id"`
		Top    int    `json:"top,omitempty" jsonschema:"how many changed lines to list (default 10)"`
	}
)

// addTools registers every tool. Each handler returns text for the model.
func addTools(s *sdk.Server, b *backend) {
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true}
	sdk.AddTool(s, &sdk.Tool{Name: "analyze_snapshot", Annotations: readOnly,
		Description: "Why a PyTorch snapshot ran out of memory or what holds its memory: the out-of-memory error, findings with fixes, top source lines at the peak, named tensors. Summary first; detail gives one section in full."},
		textTool(func(ctx context.Context, in analyzeIn) (string, error) {
			res, err := b.analysis(ctx, in.Snapshot)
			if err != nil {
				return "", err
			}
			return answer(res, in.Detail, topOf(in.Top, 10))
		}))
	sdk.AddTool(s, &sdk.Tool{Name: "diff_snapshots", Annotations: readOnly,
		Description: "What changed between two snapshots of one script: the peak and the lines whose memory at the peak changed most."},
		textTool(func(ctx context.Context, in diffIn) (string, error) { return b.diff(ctx, in) }))
	sdk.AddTool(s, &sdk.Tool{Name: "rank_view", Annotations: readOnly,
		Description: "The ranks of one distributed job side by side: each rank's peak, the imbalance, the outlier ranks and the lines that make them differ from the median rank."},
		textTool(func(ctx context.Context, in ranksIn) (string, error) { return b.ranks(ctx, in) }))
	sdk.AddTool(s, &sdk.Tool{Name: "what_fits", Annotations: readOnly,
		Description: "Fits peak memory against batch size or sequence length over two or more snapshots of one script and says the largest size that fits the device."},
		textTool(func(ctx context.Context, in whatIfIn) (string, error) { return b.whatIf(ctx, in) }))
	sdk.AddTool(s, &sdk.Tool{Name: "list_snapshots", Annotations: readOnly,
		Description: "The snapshots the vramscope daemon stored (taken on request or captured at an out-of-memory error), newest first. Needs the daemon."},
		textTool(func(ctx context.Context, in snapshotsIn) (string, error) { return b.snapshots(ctx, in) }))
	sdk.AddTool(s, &sdk.Tool{Name: "list_processes", Annotations: readOnly,
		Description: "Processes with the vramscope agent attached, and GPU processes without one. Needs the daemon."},
		textTool(func(ctx context.Context, _ noInput) (string, error) { return b.processes(ctx) }))
	sdk.AddTool(s, &sdk.Tool{Name: "take_snapshot",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: new(false)},
		Description: "Asks a process's vramscope agent for a snapshot of its GPU memory now and stores it; answers with its id for analyze_snapshot. Needs the daemon."},
		textTool(func(ctx context.Context, in takeIn) (string, error) { return b.take(ctx, in) }))
}

// textTool adapts a function answering text to the SDK's typed handler. An
// error becomes a tool result marked as an error, which the model reads.
func textTool[In any](f func(context.Context, In) (string, error)) sdk.ToolHandlerFor[In, any] {
	return func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		text, err := f(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
	}
}

func topOf(top, def int) int {
	if top <= 0 {
		return def
	}
	return min(top, 50)
}

func (b *backend) snapshots(ctx context.Context, in snapshotsIn) (string, error) {
	var res api.ListResult
	if err := b.call(ctx, api.SnapshotList, api.ListParams{PID: in.PID, Limit: topOf(in.Limit, 20)}, &res); err != nil {
		return "", err
	}
	if len(res.Snapshots) == 0 {
		return "The daemon stores no snapshots yet.", nil
	}
	var sb strings.Builder
	sb.WriteString("Stored snapshots, newest first (id, reason, size, process, source):\n")
	for _, s := range res.Snapshots {
		fmt.Fprintf(&sb, "- %s %s %s pid %d rank %d %s", s.ID, s.Reason, fb(s.Bytes), s.PID, s.Rank, s.Source)
		if s.Label != "" {
			fmt.Fprintf(&sb, " (%s)", s.Label)
		}
		sb.WriteString("\n")
	}
	return sb.String(), nil
}

func (b *backend) processes(ctx context.Context) (string, error) {
	var res api.ProcessListResult
	if err := b.call(ctx, api.ProcessList, nil, &res); err != nil {
		return "", err
	}
	if len(res.Processes) == 0 {
		return "No process has the vramscope agent, and NVML sees no GPU process.", nil
	}
	var sb strings.Builder
	sb.WriteString("Processes (pid, agent, rank, GPU, GPU memory, torch allocated, command):\n")
	for _, p := range res.Processes {
		fmt.Fprintf(&sb, "- %d agent=%v rank %d/%d gpu %d %s torch %s %s", p.PID, p.Agent, p.Rank, max(p.WorldSize, 1),
			p.Device, profiler.FormatBytes(int64(p.GPUBytes)), fb(p.Allocated), strings.Join(p.Argv, " "))
		if p.Note != "" {
			fmt.Fprintf(&sb, " (%s)", p.Note)
		}
		sb.WriteString("\n")
	}
	return sb.String(), nil
}

func (b *backend) take(ctx context.Context, in takeIn) (string, error) {
	if in.PID <= 0 {
		return "", errors.New("pid: want the pid of a process with the agent (list_processes)")
	}
	var res api.SnapshotResult
	p := api.TakeParams{PID: in.PID, Label: in.Label, Analyze: true}
	if err := b.call(ctx, api.SnapshotTake, p, &res); err != nil {
		return "", err
	}
	return fmt.Sprintf("Stored snapshot %s of pid %d: %s, %d trace entries. Analyse it with analyze_snapshot {\"snapshot\": %q}.",
		res.ID, res.PID, fb(res.Bytes), res.Entries, res.ID), nil
}
