package daemon

import (
	"context"
	"sync"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/idle"
)

// Bounds of the stack samples kept: per process (about 50 minutes of the
// training thread at the agent's default 10 Hz, less with more threads sampled), and processes
// (the one whose newest sample is oldest is dropped). A process's samples
// outlive its agent: a finished job is asked about afterwards.
const (
	maxStackSamplesPerProcess = 30000
	maxStackProcesses         = 16
)

// stackStore keeps the stack samples agents send (agent.stacks), by pid.
type stackStore struct {
	mu    sync.Mutex
	procs map[int]*procStacks
}

// procStacks is one process's samples: a ring of samples whose stacks index
// an interned frame table.
type procStacks struct {
	frames   []idle.Frame
	frameIx  map[idle.Frame]uint32
	ring     []stackRec
	next     int // where the next sample goes once the ring is full
	periodMS float64
	dropped  int
	costMS   float64
	device   int // NVML index of its GPU, from its agent
	lastMS   int64
}

type stackRec struct {
	timeMS int64
	thread string
	main   bool
	wait   idle.Wait
	stack  []uint32
}

func newStackStore() *stackStore { return &stackStore{procs: map[int]*procStacks{}} }

// add stores one batch of pid's samples.
func (st *stackStore) add(pid, device int, p *api.StacksParams) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ps := st.procs[pid]
	if ps == nil {
		st.evict()
		ps = &procStacks{frameIx: map[idle.Frame]uint32{}}
		st.procs[pid] = ps
	}
	ps.periodMS, ps.device = p.PeriodMS, device
	ps.dropped += p.Dropped
	ps.costMS += p.CostMS
	ix := make([]uint32, len(p.Frames))
	for i, f := range p.Frames {
		ix[i] = ps.intern(idle.Frame{File: f.File, Line: f.Line, Func: f.Func})
	}
	for _, s := range p.Samples {
		if s.Thread < 0 || s.Thread >= len(p.Threads) {
			continue // a sample naming no thread of its batch: dropped
		}
		ps.push(stackRec{timeMS: s.TimeMS, thread: p.Threads[s.Thread].Name, main: p.Threads[s.Thread].Main,
			wait: idle.Wait(s.Wait), stack: frameIDs(s.Stack, ix)})
	}
}

// frameIDs maps a sample's batch indexes to the process's frame ids; an index
// outside the batch ends the stack there.
func frameIDs(stack []int, ix []uint32) []uint32 {
	out := make([]uint32, 0, min(len(stack), api.MaxStackFrames))
	for _, i := range stack {
		if i < 0 || i >= len(ix) || len(out) == api.MaxStackFrames {
			break
		}
		out = append(out, ix[i])
	}
	return out
}

func (ps *procStacks) intern(f idle.Frame) uint32 {
	if i, ok := ps.frameIx[f]; ok {
		return i
	}
	i := uint32(len(ps.frames))
	ps.frames = append(ps.frames, f)
	ps.frameIx[f] = i
	return i
}

func (ps *procStacks) push(r stackRec) {
	ps.lastMS = max(ps.lastMS, r.timeMS)
	if len(ps.ring) < maxStackSamplesPerProcess {
		ps.ring = append(ps.ring, r)
		return
	}
	ps.ring[ps.next] = r
	ps.next = (ps.next + 1) % len(ps.ring)
}

// evict drops the process whose newest sample is oldest when the store is
// full. Called with st.mu held.
func (st *stackStore) evict() {
	if len(st.procs) < maxStackProcesses {
		return
	}
	oldest, pid := int64(-1), 0
	for p, ps := range st.procs {
		if oldest < 0 || ps.lastMS < oldest {
			oldest, pid = ps.lastMS, p
		}
	}
	delete(st.procs, pid)
}

// samples returns pid's samples of the windowMS up to toMS (toMS <= 0: its
// newest sample) in time order, its GPU and the sampler's facts; ok is false
// when pid sent none.
func (st *stackStore) samples(pid int, toMS, windowMS int64) (idle.Input, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ps := st.procs[pid]
	if ps == nil {
		return idle.Input{}, false
	}
	in := idle.Input{PID: pid, Device: ps.device, PeriodMS: ps.periodMS, Dropped: ps.dropped, SamplerCPUMS: ps.costMS}
	if toMS <= 0 {
		toMS = ps.lastMS
	}
	from := toMS - windowMS
	n := len(ps.ring)
	for k := range n {
		r := ps.ring[(ps.next+k)%n]
		if r.timeMS < from || r.timeMS > toMS {
			continue
		}
		s := idle.Sample{TimeMS: r.timeMS, Thread: r.thread, Main: r.main, Wait: r.wait, Stack: make([]idle.Frame, len(r.stack))}
		for i, id := range r.stack {
			s.Stack[i] = ps.frames[id]
		}
		in.Samples = append(in.Samples, s)
	}
	return in, true
}

func (s *session) agentStacks(_ context.Context, p api.StacksParams) error {
	a, err := s.currentAgent()
	if err != nil {
		return err
	}
	if len(p.Samples) > api.MaxStackSamples {
		p.Samples = p.Samples[:api.MaxStackSamples]
	}
	pr := a.process()
	s.d.stacks.add(pr.PID, pr.Device, &p)
	return nil
}
