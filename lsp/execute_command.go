package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strconv"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

func init() { register("workspace/executeCommand", (*Server).executeCommand, true) }

// commandHandlers run the commands of command.Commands, each typed by its
// entry (a test checks every entry has a handler of its argument and result
// types). A new command: an entry in lsp/command, a handler here, make generate.
var commandHandlers = map[string]commandHandler{
	command.OpenSnapshot: handle(func(s *Server, ctx context.Context, a command.OpenArgs) (command.Summary, error) {
		return s.cmdOpen(ctx, a.Path, "")
	}),
	command.CompareSnapshots: handle((*Server).cmdCompare),
	command.TakeSnapshot:     handle((*Server).cmdTake),
	command.Attach:           handle((*Server).cmdAttach),
	command.ListProcesses: handle(func(s *Server, _ context.Context, _ command.NoArgs) (api.ProcessListResult, error) {
		return daemonGet[api.ProcessListResult](s, 30*time.Second, api.ProcessList, nil)
	}),
	command.ListSnapshots: handle(func(s *Server, _ context.Context, _ command.NoArgs) (api.ListResult, error) {
		return daemonGet[api.ListResult](s, 30*time.Second, api.SnapshotList, api.ListParams{})
	}),
	command.FlameGraph: handle((*Server).cmdFlame),
	command.Status: handle(func(s *Server, _ context.Context, a command.StatusArgs) (command.StatusBar, error) {
		return s.cmdStatusBar(a.PID), nil
	}),
	command.TakeJobSnapshot: handle((*Server).cmdTakeJob),
	command.Ranks:           handle((*Server).cmdRankList),
	command.ShowFitPlans:    handle((*Server).cmdShowFitPlans),
}

// commandHandler runs one command: it decodes the one argument into the
// command's type and answers its result.
type commandHandler struct {
	args, result reflect.Type
	run          func(s *Server, ctx context.Context, name string, args []json.RawMessage) (any, error)
}

// handle makes the handler of a command whose argument is an A and result an R.
func handle[A, R any](f func(*Server, context.Context, A) (R, error)) commandHandler {
	return commandHandler{reflect.TypeFor[A](), reflect.TypeFor[R](),
		func(s *Server, ctx context.Context, name string, args []json.RawMessage) (any, error) {
			var a A
			if err := decodeArgs(name, args, &a); err != nil {
				return nil, err
			}
			r, err := f(s, ctx, a)
			if err != nil {
				return nil, err
			}
			return r, nil
		}}
}

func (s *Server) executeCommand(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Command   string            `json:"command"`
		Arguments []json.RawMessage `json:"arguments"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	h, known := commandHandlers[p.Command]
	if !known {
		return nil, invalid("unknown command " + strconv.Quote(p.Command))
	}
	return h.run(s, ctx, p.Command, p.Arguments)
}

// cmdOpen stops the analysis when the request is cancelled and no other waits for it.
func (s *Server) cmdOpen(ctx context.Context, path, id string) (command.Summary, error) {
	if path == "" {
		return command.Summary{}, invalid("openSnapshot needs a path")
	}
	l, err := s.openAndShowContext(ctx, s.inWorkspace(path))
	if err != nil {
		return command.Summary{}, invalid(err.Error())
	}
	r := l.result
	return command.Summary{Path: l.path, PeakBytes: r.Peak.Bytes, Events: r.Events, Sites: len(r.Sites), Findings: len(r.Findings), ID: id}, nil
}

func (s *Server) cmdCompare(ctx context.Context, a command.CompareArgs) (*analyze.Diff, error) {
	if a.A == "" || a.B == "" {
		return nil, invalid("compareSnapshots needs a and b")
	}
	la, err := s.snaps.loadContext(ctx, s.inWorkspace(a.A))
	if err != nil {
		return nil, invalid(err.Error())
	}
	lb, err := s.snaps.loadContext(ctx, s.inWorkspace(a.B))
	if err != nil {
		return nil, invalid(err.Error())
	}
	d := analyze.Compare(la.result, lb.result)
	for i := range d.Sites {
		d.Sites[i].File = s.paths.local(d.Sites[i].File)
	}
	return d, nil
}

func (s *Server) cmdTake(_ context.Context, a command.TakeArgs) (command.Summary, error) {
	c, err := s.link().get()
	if err != nil {
		return command.Summary{}, failed(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pid := a.PID
	if pid == 0 {
		var ps api.ProcessListResult
		if err := c.Call(ctx, api.ProcessList, nil, &ps); err != nil {
			return command.Summary{}, err
		}
		var agents []int
		for _, p := range ps.Processes {
			if p.Agent {
				agents = append(agents, p.PID)
			}
		}
		if len(agents) != 1 {
			return command.Summary{}, invalid(fmt.Sprintf("%d processes have an agent attached; pick one (vramscope.listProcesses)", len(agents)))
		}
		pid = agents[0]
	}
	var snap api.SnapshotResult
	if err := c.Call(ctx, api.SnapshotTake, api.TakeParams{PID: pid, Label: a.Label}, &snap); err != nil {
		return command.Summary{}, failed(err.Error())
	}
	return s.cmdOpen(context.Background(), snap.Path, snap.ID)
}

func (s *Server) cmdAttach(_ context.Context, a command.AttachArgs) (command.AttachResult, error) {
	pid := a.PID
	if pid <= 0 || s.cfg.Exe == "" {
		return command.AttachResult{}, invalid("attach needs a pid")
	}
	args := []string{"attach", strconv.Itoa(pid)}
	if s.cfg.Socket != "" {
		args = append(args, "--socket", s.cfg.Socket)
	}
	out, err := exec.Command(s.cfg.Exe, args...).CombinedOutput()
	if err != nil {
		return command.AttachResult{}, failed(string(out))
	}
	return command.AttachResult{Output: string(out)}, nil
}

// daemonGet calls the daemon and answers its result, waiting at most d.
func daemonGet[R any](s *Server, d time.Duration, method string, params any) (R, error) {
	var r R
	c, err := s.link().get()
	if err != nil {
		return r, failed(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := c.Call(ctx, method, params, &r); err != nil {
		return r, failed(err.Error())
	}
	return r, nil
}

// cmdFlame returns the shown snapshot's flame tree with local file names,
// rooted at a function when one is given ("flame graph from here"): for the
// extension's webview (format "tree") the tree, for any other client the
// linked report as a page it is asked to open (flamePage).
func (s *Server) cmdFlame(ctx context.Context, a command.FlameArgs) (any, error) {
	if a.Format != "" && a.Format != "html" && a.Format != "tree" {
		return nil, invalid(`flameGraph: unknown format ` + strconv.Quote(a.Format) + `: "html" or "tree"`)
	}
	l := s.shownOrPending(ctx)
	if l == nil {
		return nil, invalid("no snapshot is open")
	}
	w := flame.WeightPeak
	if a.Weight != "" {
		var ok bool
		if w, ok = flame.ParseWeight(a.Weight); !ok {
			return nil, invalid("unknown weight " + a.Weight)
		}
	}
	t := l.result.Flame(analyze.FlameOptions{Weight: w})
	if a.Function != "" {
		if sub := subtree(t.Root, a.File, a.Function); sub != nil {
			t.Root = sub
		}
	}
	s.localize(t.Root)
	if a.Format != "tree" {
		return s.flamePage(l, t, a.Function)
	}
	return t, nil
}

// subtree finds the outermost node of function fn in file (recorded name),
// the first one in depth-first order. It keeps its own stack rather than
// recursing, like every walk over a tree.
func subtree(n *flame.Node, file, fn string) *flame.Node {
	if n == nil {
		return nil
	}
	stack := []*flame.Node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Name == fn && (file == "" || n.File == file) {
			return n
		}
		for i := len(n.Children) - 1; i >= 0; i-- {
			stack = append(stack, n.Children[i])
		}
	}
	return nil
}

func (s *Server) localize(n *flame.Node) {
	if n == nil {
		return
	}
	stack := []*flame.Node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n.File = s.paths.local(n.File)
		stack = append(stack, n.Children...)
	}
}

func (s *Server) cmdStatusBar(pid int) command.StatusBar {
	var sb command.StatusBar
	if l := s.shown(); l != nil {
		sb.Snapshot = l.path
	}
	c, err := s.link().get()
	if err != nil {
		sb.Reason = err.Error()
		return sb
	}
	sb.Daemon = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var ps api.ProcessListResult
	if c.Call(ctx, api.ProcessList, nil, &ps) != nil {
		return sb
	}
	for _, p := range ps.Processes {
		if (pid != 0 && p.PID == pid) || (pid == 0 && p.Agent) {
			sb.PID, sb.GPUBytes, sb.Allocated, sb.Reserved = p.PID, p.GPUBytes, p.Allocated, p.Reserved
			var dev api.DevicesResult
			if c.Call(ctx, api.CountersDevices, nil, &dev) == nil {
				sb.UtilGPU = utilOf(dev, p.Device)
			}
			break
		}
	}
	return sb
}

// utilOf reads utilization.gpu of one device from the latest samples.
func utilOf(dev api.DevicesResult, device int) *int {
	for _, x := range dev.Latest {
		if x.Device == device && x.UtilGPUPct != nil {
			u := int(*x.UtilGPUPct)
			return &u
		}
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// invalid is the error of a command whose arguments cannot be used.
func invalid(msg string) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: msg}
}

// failed is the error of a command that could not be carried out.
func failed(msg string) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: msg}
}
