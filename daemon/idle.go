package daemon

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/profiler/idle"
)

// defaultIdleWindowMS is idle.report's window without window_ms.
const defaultIdleWindowMS = 60_000

// idleReport joins a process's stack samples with its GPU's utilisation.
func (s *session) idleReport(_ context.Context, p api.IdleParams) (api.IdleResult, error) {
	if p.WindowMS <= 0 {
		p.WindowMS = defaultIdleWindowMS
	}
	res, ok := s.d.idleFor(p.PID, 0, p.WindowMS, p.Raw)
	if !ok {
		return res, fail(errNotFound, "process %d sent no stack samples (is its agent attached, with VRAMSCOPE_STACK_HZ not 0?)", p.PID)
	}
	return res, nil
}

// idleFor is the idle report of pid over the windowMS of samples up to toMS
// (0: its newest sample); ok is false when pid sent none.
func (d *Daemon) idleFor(pid int, toMS, windowMS int64, raw bool) (api.IdleResult, bool) {
	in, ok := d.stacks.samples(pid, toMS, windowMS)
	if !ok {
		return api.IdleResult{}, false
	}
	in.Util, in.Shared = d.counters.utilFor(in)
	r := idle.Join(in, idle.Options{})
	res := IdleResultOf(&r)
	switch {
	case !d.counters.st.Available:
		res.Note = "no GPU utilisation: " + d.counters.st.Reason
	case len(in.Samples) == 0:
		res.Note = "no stack samples in the window"
	case r.WallMS == 0:
		res.Note = "no utilisation readings of the process's GPU in the window"
	}
	if raw {
		res.Input = &in
	}
	return res, true
}

// utilFor reads the utilisation of in's GPU over its samples' span (a
// reading a little after the last sample closes its window), and whether
// other processes are on that GPU now (NVML lists them; their kernels count
// in the device's utilisation).
func (c *counterSource) utilFor(in idle.Input) ([]idle.Util, bool) {
	if !c.st.Available || len(in.Samples) == 0 {
		return nil, false
	}
	from, to := in.Samples[0].TimeMS-2000, in.Samples[len(in.Samples)-1].TimeMS+2000
	var out []idle.Util
	for _, s := range c.col.Series(in.Device, from, to, 0) {
		if s.Has(counters.FieldUtilGPU) {
			out = append(out, toIdleUtil(s))
		}
	}
	shared := false
	for _, p := range c.Processes() {
		shared = shared || (p.Device == in.Device && p.PID != in.PID)
	}
	return out, shared
}

func toIdleUtil(s counters.DeviceSample) idle.Util {
	u := idle.Util{TimeMS: s.TimeMS, GPU: float64(s.UtilGPUPct), SMActive: -1, PCIeMBps: -1}
	if s.GPM != nil && s.Has(counters.FieldGPMSMActive) {
		u.SMActive = s.GPM.SMActivePct
	}
	if s.Has(counters.FieldPCIeRx | counters.FieldPCIeTx) {
		u.PCIeMBps = float64(s.PCIeRxKBps+s.PCIeTxKBps) * 1024 / 1e6
	}
	return u
}

// IdleResultOf is a join's report as the wire carries it (idle.report, vramscope idle).
func IdleResultOf(r *idle.Report) api.IdleResult {
	res := api.IdleResult{PID: r.PID, Device: r.Device, FromMS: r.FromMS, ToMS: r.ToMS, WallMS: r.WallMS, IdleMS: r.IdleMS,
		IdleShare: r.IdleShare, CopyMS: r.CopyMS, Samples: r.Samples, PeriodMS: r.PeriodMS, Dropped: r.Dropped,
		Shared: r.Shared, SamplerCPUMS: r.SamplerCPUMS, Headline: r.Headline(), Causes: make([]api.IdleCause, 0, len(r.Causes))}
	for _, c := range r.Causes {
		ac := api.IdleCause{Kind: string(c.Kind), Title: c.Title, IdleMS: c.IdleMS, Share: c.Share, Site: toIdleSite(c.Site),
			Lines: make([]api.IdleSite, 0, len(c.Lines)), Fix: c.Fix}
		for _, l := range c.Lines {
			ac.Lines = append(ac.Lines, toIdleSite(l))
		}
		res.Causes = append(res.Causes, ac)
	}
	return res
}

func toIdleSite(s idle.Site) api.IdleSite {
	return api.IdleSite{File: s.File, Line: s.Line, Func: s.Func, IdleMS: s.IdleMS, Share: s.Share}
}

// utilNow is each GPU's latest utilization.gpu, by NVML index.
func (c *counterSource) utilNow() map[int]uint32 {
	out := map[int]uint32{}
	if !c.st.Available {
		return out
	}
	for _, s := range c.col.Latest() {
		if s.Has(counters.FieldUtilGPU) {
			out[s.Device] = s.UtilGPUPct
		}
	}
	return out
}

// withIdle adds its GPU's utilisation and its idle report's headline to an
// agent's process (process.list, vramscope ps).
func (d *Daemon) withIdle(p api.Process, util map[int]uint32) api.Process {
	if u, ok := util[p.Device]; ok {
		p.UtilGPU = &u
	}
	r, ok := d.idleFor(p.PID, 0, defaultIdleWindowMS, false)
	if !ok || r.WallMS == 0 {
		return p
	}
	p.IdleShare = r.IdleShare
	if len(r.Causes) > 0 && r.Headline != "" {
		c := r.Causes[0]
		p.IdleTop = fmt.Sprintf("%s at %s:%d", c.Title, filepath.Base(c.Site.File), c.Site.Line)
	}
	return p
}
