// Package mcp is vramscope's Model Context Protocol server (vramscope mcp):
// the tools and resources a coding assistant uses to ask why a run ran out
// of GPU memory. It is built on the official Go SDK; it reads snapshot files
// itself and reaches stored snapshots and live processes through a running
// daemon (daemon/client), never starting one. Answers are text sized for a
// model's context: a summary first, details when asked for.
package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is what the server needs to know.
type Config struct {
	// Socket is the daemon's Unix socket; tools that need a daemon say so
	// when nothing answers there.
	Socket string
	// Version is vramscope's version, reported to the client.
	Version string
	// Logf logs what the user of the server should see (stderr); nil: silent.
	Logf func(format string, args ...any)
}

// instructions tell the assistant how to use the tools, at initialize.
const instructions = `vramscope explains PyTorch GPU memory: why a run ran out of memory, what holds memory at the peak, leaks, caches and what fits.
Start with analyze_snapshot on a snapshot file (.pickle from torch.cuda.memory._dump_snapshot, or .vsm) or a stored snapshot id (list_snapshots); it answers with a short summary: the out-of-memory error, the findings with their fixes, the top source lines at the peak and the named tensors.
Ask for detail (lines, findings, tensors, steps, categories, stacks, allocator) only when the summary is not enough.
list_processes and take_snapshot need the vramscope daemon (vramscope serve).`

// New returns the server with its tools and resources.
func New(cfg Config) *sdk.Server {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "vramscope", Title: "vramscope GPU memory", Version: cfg.Version},
		&sdk.ServerOptions{Instructions: instructions})
	b := newBackend(cfg)
	addTools(s, b)
	addResources(s, b)
	return s
}

// RunStdio serves one client on stdin and stdout until it closes them.
func RunStdio(ctx context.Context, cfg Config) error {
	return New(cfg).Run(ctx, &sdk.StdioTransport{})
}
