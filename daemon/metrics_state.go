package daemon

import (
	"sync"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/metrics"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// findingKinds start at 0 in vramscope_findings_total, so a rate() over
// them works before the first finding (the analysis's kinds and the
// daemon's own non_pytorch_memory).
var findingKinds = []string{analyze.KindOOM, analyze.KindFragmentation, analyze.KindLargeAllocation, analyze.KindActivationPeak,
	analyze.KindLeak, analyze.KindCacheGrowth, analyze.KindUnboundedCache, analyze.KindLoopAccumulation, analyze.KindOptimizerState,
	analyze.KindMemoryGrowth, "non_pytorch_memory", idleFindingKind}

// exportCounts counts events since the daemon started, for Prometheus.
type exportCounts struct {
	mu        sync.Mutex
	ooms      uint64
	snapshots map[string]uint64
	findings  map[string]uint64
}

func newExportCounts() *exportCounts {
	c := &exportCounts{snapshots: map[string]uint64{}, findings: map[string]uint64{}}
	for _, r := range metrics.Reasons {
		c.snapshots[r] = 0
	}
	for _, k := range findingKinds {
		c.findings[k] = 0
	}
	return c
}

// count is the events listener: a stored snapshot counts with its reason
// and the findings of its analysis (cached by the commit just before), an
// oom_captured event as an OOM.
func (d *Daemon) count(method string, params any) {
	c := d.counts
	switch method {
	case api.EventSnapshotStored:
		r, _ := params.(api.SnapshotResult)
		res := d.analyses.Peek(r.ID)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.snapshots[metrics.Reason(r.Reason)]++
		if res != nil {
			for _, f := range res.Findings {
				c.findings[f.Kind]++ // the engine's own kinds: a fixed set
			}
		}
	case api.EventOOMCaptured:
		c.mu.Lock()
		c.ooms++
		c.mu.Unlock()
	}
}

// metricsState is what a scrape reports, read now.
func (d *Daemon) metricsState() metrics.State {
	st := metrics.State{CountersAvailable: d.counters.Status().Available, Agents: d.agents.count(),
		StoredSnapshots: len(d.store.List())}
	phases := map[int]string{}
	for _, p := range d.counters.currentPhases() {
		phases[p.Device] = p.Class
	}
	for _, s := range d.counters.col.Latest() {
		st.GPUs = append(st.GPUs, metrics.GPU{Sample: s, Phase: phases[s.Device]})
	}
	nvml := map[int]uint64{}
	for _, p := range d.counters.Processes() {
		nvml[p.PID] += p.UsedBytes
	}
	now := time.Now()
	for _, a := range d.agents.list() {
		p := a.process()
		a.mu.Lock()
		peak := a.peak
		a.mu.Unlock()
		pod := d.pod(a)
		used, seen := nvml[p.PID]
		mp := metrics.Process{PID: p.PID, Rank: p.Rank, WorldSize: p.WorldSize, Device: p.Device,
			Recording: p.Recording, Allocated: p.Allocated, Reserved: p.Reserved, Peak: peak, GPUBytes: used, HasGPU: seen,
			Pod: pod.Pod, Namespace: pod.Namespace, Container: pod.Container, PodUID: pod.PodUID, Idle: d.idleMetric(p.PID)}
		mp.OOMETA, mp.HasOOMETA = d.oomETA(p.PID, now)
		st.Processes = append(st.Processes, mp)
	}
	c := d.counts
	c.mu.Lock()
	st.OOMs = c.ooms
	st.Snapshots = copyCounts(c.snapshots)
	st.Findings = copyCounts(c.findings)
	c.mu.Unlock()
	return st
}

func copyCounts(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// idleMetric is a process's idle share over the last minute, by cause; nil
// without samples or utilisation readings.
func (d *Daemon) idleMetric(pid int) *metrics.Idle {
	r, ok := d.idleFor(pid, 0, defaultIdleWindowMS, false)
	if !ok || r.WallMS == 0 {
		return nil
	}
	m := &metrics.Idle{Share: r.IdleShare, ByCause: map[string]float64{}}
	for _, c := range r.Causes {
		m.ByCause[c.Kind] = c.Share
	}
	return m
}

// oomETA is the seconds from now to pid's projected full device (at least
// 0), and whether there is one: its step peaks grow and their levels carry
// times.
func (d *Daemon) oomETA(pid int, now time.Time) (float64, bool) {
	return etaOf(d.warner.forecast(pid), now)
}

// etaOf is the seconds from now to f's projected time (at least 0), and
// whether f has one.
func etaOf(f *api.MemoryForecast, now time.Time) (float64, bool) {
	if f == nil || f.ProjectedTime.IsZero() {
		return 0, false
	}
	return max(f.ProjectedTime.Sub(now).Seconds(), 0), true
}
