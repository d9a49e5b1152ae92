package daemon

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/kube"
	"github.com/vramscope/vramscope/daemon/transport"
)

// agent is one attached training process.
type agent struct {
	s     *session
	ref   kube.Ref // its pod and container, from its cgroup at registration
	nsPID int      // the pid it registered with, when it lives in another pid namespace (proc.PID is the daemon's view)
	mu    sync.Mutex
	proc  api.Process
	peak  int64 // torch.cuda.max_memory_allocated, from agent.torch
	// cudaDevice is the device by CUDA's numbering in the process, nvmlDevice
	// the same GPU by NVML's index (-1: not known, from its UUID).
	cudaDevice, nvmlDevice int
	// job ties it to the other ranks of its launch (jobKey; "" alone).
	job string
}

// device maps a device index the agent reports (CUDA's numbering) to NVML's.
func (a *agent) device(cuda int) int {
	if cuda == a.cudaDevice && a.nvmlDevice >= 0 {
		return a.nvmlDevice
	}
	return cuda
}

// nvmlOf is device (CUDA's numbering) by NVML's index, and whether it is:
// only the device whose UUID the agent reported can be mapped.
func (a *agent) nvmlOf(cuda int) (int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cuda == a.cudaDevice && a.nvmlDevice >= 0 {
		return a.nvmlDevice, true
	}
	return cuda, false
}

func (a *agent) process() api.Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc
}

// agents is the registry of attached processes, by pid.
type agents struct {
	mu    sync.Mutex
	byPID map[int]*agent
}

func newAgents() *agents { return &agents{byPID: map[int]*agent{}} }

func (r *agents) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byPID)
}

func (r *agents) get(pid int) *agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPID[pid]
}

func (r *agents) list() []*agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*agent, 0, len(r.byPID))
	for _, a := range r.byPID {
		out = append(out, a)
	}
	return out
}

func (s *session) agentRegister(_ context.Context, p api.RegisterParams) (api.RegisterResult, error) {
	if p.PID <= 0 {
		return api.RegisterResult{}, fail(errInvalid, "agent.register needs the process's pid")
	}
	if p.APIVersion != "" && major(p.APIVersion) != major(api.Version) {
		return api.RegisterResult{}, fail(errVersion, "agent speaks API %s, the daemon %s", p.APIVersion, api.Version)
	}
	d := s.d
	pid, nsPID := p.PID, 0
	if host := transport.PeerPID(s.wire.Conn()); host > 0 && host != p.PID && transport.OtherPIDNamespace(host) {
		// A process in a container knows itself by its namespace's pid (often
		// 1, in every pod); NVML, /proc and other pods' agents need the node's.
		pid, nsPID = host, p.PID
	}
	a := &agent{s: s, ref: d.podRef(pid), nsPID: nsPID, proc: api.Process{
		PID: pid, Agent: true, Host: p.Host, Rank: p.Rank, LocalRank: p.LocalRank, WorldSize: p.WorldSize,
		Argv: p.Argv, Python: p.Python, Torch: p.Torch, CUDA: p.CUDA, Device: p.Device,
		Recording: p.Recording, MaxEntries: p.MaxEntries, Note: p.Note,
		Connected: time.Now().UTC().Format(time.RFC3339), Job: jobKey(p.WorldSize, p.JobFacts),
	}, cudaDevice: p.Device, nvmlDevice: -1}
	a.job = a.proc.Job
	if i, ok := d.counters.deviceByUUID(p.DeviceUUID); ok {
		a.nvmlDevice = i
		a.proc.Device = i
	}
	d.agents.mu.Lock()
	old := d.agents.byPID[pid]
	d.agents.byPID[pid] = a
	d.agents.mu.Unlock()
	if old != nil && old.s != s {
		old.s.rpc().Close() // a re-registration after a reconnect replaces the stale one
	}
	s.mu.Lock()
	s.agent = a
	s.mu.Unlock()
	d.cfg.Logf("agent %d registered (rank %d/%d, %s%s)", pid, p.Rank, p.WorldSize, firstArg(p.Argv), a.where())
	d.events.publish(api.EventAgentConnected, api.AgentEvent{Process: a.process()})
	return api.RegisterResult{IncomingDir: d.store.IncomingDir(), APIVersion: api.Version}, nil
}

// agentGone removes an agent whose connection closed (unless it has already
// been replaced by a newer registration of the same pid).
func (d *Daemon) agentGone(a *agent, reason string) {
	d.agents.mu.Lock()
	pid := a.process().PID
	gone := d.agents.byPID[pid] == a
	if gone {
		delete(d.agents.byPID, pid)
	}
	d.agents.mu.Unlock()
	if gone { // a reconnect of the same process keeps its levels and warning state
		d.levels.forget(pid) // its snapshots keep theirs
		d.warner.forget(pid)
	}
	d.cfg.Logf("agent %d gone: %s", pid, reason)
	d.events.publish(api.EventAgentGone, api.AgentEvent{Process: a.process(), Reason: reason})
	go d.importSpool() // a process that exits with a snapshot in the spool hands it over no more
}

func (s *session) currentAgent() (*agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agent == nil {
		return nil, fail(errNoAgent, "call agent.register first")
	}
	return s.agent, nil
}

func (s *session) agentTorch(_ context.Context, p api.TorchParams) error {
	a, err := s.currentAgent()
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.proc.Allocated, a.proc.Reserved, a.proc.Device, a.peak = p.Allocated, p.Reserved, a.device(p.Device), p.MaxAlloc
	a.mu.Unlock()
	return nil
}

func (s *session) processList(_ context.Context, _ noParams) (api.ProcessListResult, error) {
	d := s.d
	res := api.ProcessListResult{Processes: []api.Process{}}
	seen := map[int]int{}
	util := d.counters.utilNow()
	for _, a := range d.agents.list() {
		p := a.process()
		if p.Forecast = d.warner.forecast(p.PID); p.Forecast != nil {
			p.Forecast.ETASeconds, _ = etaOf(p.Forecast, time.Now())
		}
		seen[p.PID] = len(res.Processes)
		res.Processes = append(res.Processes, d.withIdle(p, util))
	}
	for _, gp := range d.counters.Processes() {
		if i, ok := seen[gp.PID]; ok {
			res.Processes[i].GPUBytes += gp.UsedBytes
			continue
		}
		seen[gp.PID] = len(res.Processes)
		res.Processes = append(res.Processes, api.Process{PID: gp.PID, Device: gp.Device, GPUBytes: gp.UsedBytes,
			Argv: cmdline(gp.PID), Note: "no agent attached"})
	}
	sort.Slice(res.Processes, func(i, j int) bool {
		a, b := res.Processes[i], res.Processes[j]
		if a.Agent != b.Agent {
			return a.Agent
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		return a.PID < b.PID
	})
	return res, nil
}

// firstArg is what a command line runs: the script or module after the
// interpreter's own options ("python -u train.py" -> "train.py").
func firstArg(argv []string) string {
	if len(argv) == 0 {
		return "?"
	}
	rest := argv
	if strings.HasPrefix(filepath.Base(argv[0]), "python") {
		rest = argv[1:]
	}
	for i, a := range rest {
		if a == "-m" && i+1 < len(rest) {
			return "-m " + rest[i+1]
		}
		if a != "" && a[0] != '-' {
			return a
		}
	}
	return argv[0]
}
