package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

func init() { register("workspace/executeCommand", (*Server).executeCommand, true) }

// The commands the editor runs; each takes one object argument.
const (
	cmdOpenSnapshot     = "vramscope.openSnapshot"     // {path} -> summary
	cmdCompareSnapshots = "vramscope.compareSnapshots" // {a, b} -> analyze.Diff
	cmdTakeSnapshot     = "vramscope.takeSnapshot"     // {pid?, label?} -> summary (pid: the only agent when omitted)
	cmdAttach           = "vramscope.attach"           // {pid} -> {output}
	cmdListProcesses    = "vramscope.listProcesses"    // {} -> api.ProcessListResult
	cmdListSnapshots    = "vramscope.listSnapshots"    // {} -> api.ListResult
	cmdFlameGraph       = "vramscope.flameGraph"       // {file?, function?, weight?, format?} -> FlamePage, or flame.Tree (local paths) with format "tree"
	cmdStatus           = "vramscope.status"           // {pid?} -> status for the status bar
	cmdShowFitPlans     = "vramscope.showFitPlans"     // {file, line} -> FitPlansPage (the OOM finding's plans, opened)
)

type commandArgs struct {
	Path     string `json:"path"`
	A        string `json:"a"`
	B        string `json:"b"`
	PID      int    `json:"pid"`
	Label    string `json:"label"`
	File     string `json:"file"`
	Function string `json:"function"`
	Weight   string `json:"weight"`
	Group    string `json:"group"`
	Format   string `json:"format"`         // of flameGraph: "html" (a page, opened) or "tree" (the extension's webview)
	Line     int    `json:"line,omitempty"` // of showFitPlans: the recorded line that ran out of memory
}

// Summary is what opening or taking a snapshot answers.
type Summary struct {
	Path      string `json:"path"`
	PeakBytes int64  `json:"peak_bytes"`
	Events    int64  `json:"events"`
	Sites     int    `json:"sites"`
	Findings  int    `json:"findings"`
	ID        string `json:"id,omitempty"` // the daemon's snapshot id
}

func (s *Server) executeCommand(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Command   string            `json:"command"`
		Arguments []json.RawMessage `json:"arguments"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if _, known := argShapes[p.Command]; !known {
		return nil, invalid("unknown command " + strconv.Quote(p.Command))
	}
	a, err := decodeArgs(p.Command, p.Arguments)
	if err != nil {
		return nil, err
	}
	switch p.Command {
	case cmdOpenSnapshot:
		return s.cmdOpen(ctx, a.Path, "")
	case cmdCompareSnapshots:
		return s.cmdCompare(ctx, a)
	case cmdTakeSnapshot:
		return s.cmdTake(a)
	case cmdAttach:
		return s.cmdAttachPID(a.PID)
	case cmdShowFitPlans:
		return s.cmdShowFitPlans(a)
	case cmdListProcesses:
		return s.daemonCall(api.ProcessList, nil, &api.ProcessListResult{})
	case cmdListSnapshots:
		return s.daemonCall(api.SnapshotList, api.ListParams{}, &api.ListResult{})
	case cmdFlameGraph:
		return s.cmdFlame(ctx, a)
	case cmdStatus:
		return s.cmdStatusBar(a.PID), nil
	case cmdTakeJobSnapshot:
		return s.cmdTakeJob(a)
	case cmdRanks:
		return s.cmdRankList(a)
	}
	return nil, invalid("unknown command " + strconv.Quote(p.Command))
}

// cmdOpen stops the analysis when the request is cancelled and no other waits for it.
func (s *Server) cmdOpen(ctx context.Context, path, id string) (any, error) {
	if path == "" {
		return nil, invalid("openSnapshot needs a path")
	}
	l, err := s.openAndShowContext(ctx, s.inWorkspace(path))
	if err != nil {
		return nil, invalid(err.Error())
	}
	r := l.result
	return Summary{Path: l.path, PeakBytes: r.Peak.Bytes, Events: r.Events, Sites: len(r.Sites), Findings: len(r.Findings), ID: id}, nil
}

func (s *Server) cmdCompare(ctx context.Context, a commandArgs) (any, error) {
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

func (s *Server) cmdTake(a commandArgs) (any, error) {
	c, err := s.link().get()
	if err != nil {
		return nil, failed(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pid := a.PID
	if pid == 0 {
		var ps api.ProcessListResult
		if err := c.Call(ctx, api.ProcessList, nil, &ps); err != nil {
			return nil, err
		}
		var agents []int
		for _, p := range ps.Processes {
			if p.Agent {
				agents = append(agents, p.PID)
			}
		}
		if len(agents) != 1 {
			return nil, invalid(fmt.Sprintf("%d processes have an agent attached; pick one (vramscope.listProcesses)", len(agents)))
		}
		pid = agents[0]
	}
	var snap api.SnapshotResult
	if err := c.Call(ctx, api.SnapshotTake, api.TakeParams{PID: pid, Label: a.Label}, &snap); err != nil {
		return nil, failed(err.Error())
	}
	return s.cmdOpen(context.Background(), snap.Path, snap.ID)
}

func (s *Server) cmdAttachPID(pid int) (any, error) {
	if pid <= 0 || s.cfg.Exe == "" {
		return nil, invalid("attach needs a pid")
	}
	args := []string{"attach", strconv.Itoa(pid)}
	if s.cfg.Socket != "" {
		args = append(args, "--socket", s.cfg.Socket)
	}
	out, err := exec.Command(s.cfg.Exe, args...).CombinedOutput()
	if err != nil {
		return nil, failed(string(out))
	}
	return map[string]string{"output": string(out)}, nil
}

func (s *Server) daemonCall(method string, params, result any) (any, error) {
	c, err := s.link().get()
	if err != nil {
		return nil, failed(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Call(ctx, method, params, result); err != nil {
		return nil, failed(err.Error())
	}
	return result, nil
}

// cmdFlame returns the shown snapshot's flame tree with local file names,
// rooted at a function when one is given ("flame graph from here"): for the
// extension's webview (format "tree") the tree, for any other client the
// linked report as a page it is asked to open (flamePage).
func (s *Server) cmdFlame(ctx context.Context, a commandArgs) (any, error) {
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

// StatusBar is what the extension's status bar shows.
type StatusBar struct {
	Daemon    bool   `json:"daemon"`
	Reason    string `json:"reason,omitempty"`
	PID       int    `json:"pid,omitempty"`
	GPUBytes  uint64 `json:"gpu_bytes,omitempty"`
	Allocated int64  `json:"torch_allocated,omitempty"`
	Reserved  int64  `json:"torch_reserved,omitempty"`
	UtilGPU   *int   `json:"util_gpu,omitempty"`
	Snapshot  string `json:"snapshot,omitempty"`
}

func (s *Server) cmdStatusBar(pid int) StatusBar {
	var sb StatusBar
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
	b, err := json.Marshal(dev.Latest)
	if err != nil {
		return nil
	}
	var latest []struct {
		Device  int  `json:"device"`
		UtilGPU *int `json:"util_gpu_pct"`
	}
	if json.Unmarshal(b, &latest) != nil {
		return nil
	}
	for _, x := range latest {
		if x.Device == device {
			return x.UtilGPU
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
