package daemon

// Group capture (issue #17): every rank of one launch asked for its snapshot
// at the same moment, stored as one group. The ranks of a job are the
// attached processes with the same job key (jobKey); an out-of-memory error
// on one rank captures the others the same way (fanOutOOM).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// jobKey is what ties a process to the other ranks of its launch: torchrun's
// run id (unless it is torchrun's default "none", shared by every launch
// without --rdzv-id), else the rendezvous address, else, for a process that
// says it is one of several (WORLD_SIZE > 1), its parent. "" for a process
// alone.
func jobKey(worldSize int, p api.JobFacts) string {
	switch {
	case p.RunID != "" && p.RunID != "none":
		return "run:" + p.RunID
	case p.MasterAddr != "" && p.MasterPort != "":
		return "master:" + p.MasterAddr + ":" + p.MasterPort
	case p.PPID > 1 && worldSize > 1:
		return "parent:" + strconv.Itoa(p.PPID)
	}
	return ""
}

// job lists the agents of a's job, by rank (a alone when it has no job).
func (r *agents) job(a *agent) []*agent {
	key := a.job
	if key == "" {
		return []*agent{a}
	}
	var out []*agent
	for _, b := range r.list() {
		if b.job == key {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y *agent) int { return x.process().Rank - y.process().Rank })
	return out
}

func (s *session) groupTake(ctx context.Context, p api.GroupTakeParams) (api.GroupResult, error) {
	d := s.d
	a, timeout, err := d.takeTarget(p.PID, p.TimeoutMS)
	if err != nil {
		return api.GroupResult{}, err
	}
	ranks := d.agents.job(a)
	if err := d.checkRanks(jobOf(a), ranks); err != nil {
		return api.GroupResult{}, err
	}
	g := store.Group{ID: d.store.NewGroupID(), Reason: "request", Job: jobOf(a), Label: p.Label}
	req := captureReq{label: p.Label, group: g.ID, reason: "request", timeout: timeout}
	d.captureRanks(ctx, &g, ranks, req)
	if len(g.Members) == 0 {
		return api.GroupResult{}, fail(errAgentFailed, "no rank of %s gave a snapshot: %s", g.Job, g.Failed[0].Error)
	}
	return d.storeGroup(g)
}

// checkRanks refuses ranks that cannot make one whole group: two processes
// with one rank (not one launch: a group of them would hold a rank twice),
// or more ranks than the store keeps (retention would remove the first
// members while the last are committed).
func (d *Daemon) checkRanks(job string, ranks []*agent) error {
	pids := map[int]int{}
	for _, a := range ranks {
		p := a.process()
		if other, dup := pids[p.Rank]; dup {
			return fail(errInvalid, "%s has two processes of rank %d (pids %d and %d): they are not one launch (do two launches share TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT?); take their snapshots one by one", job, p.Rank, other, p.PID)
		}
		pids[p.Rank] = p.PID
	}
	if limit := d.store.Limits().MaxCount; len(ranks) > limit {
		return fail(errInvalid, "%s has %d ranks and the store keeps at most %d snapshots (--max-snapshots): the group would lose ranks; raise the limit", job, len(ranks), limit)
	}
	return nil
}

// jobOf names a's job in a group record ("pid:N" for a process alone).
func jobOf(a *agent) string {
	if a.job == "" {
		return "pid:" + strconv.Itoa(a.process().PID)
	}
	return a.job
}

// captureRanks asks every agent at once (one goroutine each, so that the
// ranks are read as close together as the agents allow) and adds what each
// gave to g: its member, or its failure.
func (d *Daemon) captureRanks(ctx context.Context, g *store.Group, ranks []*agent, req captureReq) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, a := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc := a.process()
			c, err := d.capture(ctx, a, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				g.Failed = append(g.Failed, store.Failure{Rank: proc.Rank, PID: proc.PID, Error: err.Error()})
				return
			}
			g.Members = append(g.Members, store.Member{Rank: c.meta.Rank, PID: c.meta.PID, ID: c.meta.ID, CapturedMS: unixMS(c.at)})
		}()
	}
	wg.Wait()
}

// storeGroup orders g's members by rank, measures the skew, writes the
// record and tells subscribers.
func (d *Daemon) storeGroup(g store.Group) (api.GroupResult, error) {
	d.dropRetained(&g)
	slices.SortFunc(g.Members, func(x, y store.Member) int { return x.Rank - y.Rank })
	slices.SortFunc(g.Failed, func(x, y store.Failure) int { return x.Rank - y.Rank })
	g.SkewMS = skew(g.Members)
	g.Created = time.Now().UTC()
	if err := d.store.WriteGroup(g); err != nil {
		// The members are stored and name the group: it is still found,
		// assembled from them, without its skew.
		return api.GroupResult{}, fail(errStoreFailed, "%v", err)
	}
	d.cfg.Logf("group %s of %s: %d ranks, %d failed, skew %.1f ms", g.ID, g.Job, len(g.Members), len(g.Failed), g.SkewMS)
	res := d.groupResult(g)
	d.events.publish(api.EventGroupStored, res)
	return res, nil
}

// dropRetained moves to g's failures the members the store has removed
// already (the byte limit, while the later ranks were committed), saying so:
// a group never loses a rank without a word.
func (d *Daemon) dropRetained(g *store.Group) {
	kept := g.Members[:0]
	for _, m := range g.Members {
		if _, ok := d.store.Get(m.ID); ok {
			kept = append(kept, m)
			continue
		}
		lim := d.store.Limits()
		g.Failed = append(g.Failed, store.Failure{Rank: m.Rank, PID: m.PID, Error: fmt.Sprintf(
			"its snapshot %s was stored, then removed by the retention limits (%d snapshots, %d bytes: --max-snapshots, --max-bytes) while the other ranks were stored", m.ID, lim.MaxCount, lim.MaxBytes)})
	}
	g.Members = kept
}

func skew(ms []store.Member) float64 {
	if len(ms) == 0 {
		return 0
	}
	lo, hi := ms[0].CapturedMS, ms[0].CapturedMS
	for _, m := range ms[1:] {
		lo, hi = min(lo, m.CapturedMS), max(hi, m.CapturedMS)
	}
	return hi - lo
}

func unixMS(t time.Time) float64 { return float64(t.UnixMicro()) / 1000 }

func (d *Daemon) groupResult(g store.Group) api.GroupResult {
	res := api.GroupResult{Group: api.Group{ID: g.ID, Created: g.Created, Reason: g.Reason, Job: g.Job, Label: g.Label,
		SkewMS: g.SkewMS, Partial: g.Partial, Members: []api.GroupMember{}}, Snapshots: []api.SnapshotResult{}}
	for _, m := range g.Members {
		res.Members = append(res.Members, api.GroupMember(m))
		if meta, ok := d.store.Get(m.ID); ok {
			res.Snapshots = append(res.Snapshots, d.snapshotResult(meta))
		}
	}
	for _, f := range g.Failed {
		res.Failed = append(res.Failed, api.GroupFailure(f))
	}
	return res
}

// fanOutOOM captures the other ranks of an agent that ran out of memory,
// into the group its OOM snapshot names: what every rank held at that
// moment. It starts when the OOM snapshot arrives, while that one is still
// analysed and committed; oomRank then says how that went (no ID: it was
// not stored). Off the agent's call: the agent is waiting at exit.
func (d *Daemon) fanOutOOM(g store.Group, oomRank <-chan *store.Member, others []*agent) {
	d.captureRanks(context.Background(), &g, others, captureReq{group: g.ID, reason: "oom", timeout: d.cfg.DumpTimeout})
	if m := <-oomRank; m.ID != "" {
		g.Members = append(g.Members, *m)
	} else {
		g.Failed = append(g.Failed, store.Failure{Rank: m.Rank, PID: m.PID, Error: "its out-of-memory snapshot could not be stored"})
	}
	if len(g.Members) == 0 {
		d.cfg.Logf("group %s after an OOM: no rank was stored", g.ID)
		return
	}
	if _, err := d.storeGroup(g); err != nil {
		d.cfg.Logf("group %s after an OOM: %v", g.ID, err)
	}
}

// oomGroup prepares the group of an OOM capture on a: a group ID for the
// snapshot's meta and the agents to ask, or nothing when a has no siblings.
func (d *Daemon) oomGroup(a *agent) (store.Group, []*agent) {
	var others []*agent
	for _, b := range d.agents.job(a) {
		if b != a {
			others = append(others, b)
		}
	}
	if len(others) == 0 {
		return store.Group{}, nil
	}
	if err := d.checkRanks(jobOf(a), append(others, a)); err != nil {
		d.cfg.Logf("no group for the out-of-memory snapshot of pid %d: %v", a.process().PID, err)
		return store.Group{}, nil
	}
	return store.Group{ID: d.store.NewGroupID(), Reason: "oom", Job: jobOf(a)}, others
}

func (s *session) groupList(_ context.Context, _ noParams) (api.GroupListResult, error) {
	res := api.GroupListResult{Groups: []api.GroupResult{}}
	for _, g := range s.d.store.Groups() {
		res.Groups = append(res.Groups, s.d.groupResult(g))
	}
	return res, nil
}

func (s *session) groupGet(_ context.Context, p api.IDParams) (api.GroupResult, error) {
	g, err := s.d.group(p.ID)
	if err != nil {
		return api.GroupResult{}, err
	}
	return s.d.groupResult(g), nil
}

func (d *Daemon) group(id string) (store.Group, error) {
	g, ok := d.store.Group(id)
	if !ok {
		return store.Group{}, fail(errNotFound, "no group %q (see group.list)", id)
	}
	return g, nil
}

// analysisRanks is the rank view of a group: each member's cached analysis,
// its device by NVML's index where the daemon knew it, NVML's memory of it.
func (s *session) analysisRanks(_ context.Context, p api.RanksParams) (*analyze.Ranks, error) {
	d := s.d
	g, err := d.group(p.Group)
	if err != nil {
		return nil, err
	}
	var snaps []analyze.RankSnapshot
	for _, m := range g.Members {
		meta, err := d.lookup(m.ID)
		if err != nil {
			return nil, err
		}
		res, err := d.analyses.Get(m.ID)
		if err != nil {
			return nil, fail(errBadSnapshot, "rank %d (snapshot %s): %v", m.Rank, m.ID, err)
		}
		rs := analyze.RankSnapshot{Rank: meta.Rank, Source: meta.ID, Result: res, Device: -1, GPUBytes: int64(meta.GPUBytes)}
		if meta.DeviceByNVML {
			rs.Device = meta.Device
		}
		snaps = append(snaps, rs)
	}
	rv, err := analyze.CompareRanks(snaps)
	if err != nil {
		return nil, fail(errBadSnapshot, "group %s: %v", g.ID, err)
	}
	return rv, nil
}
