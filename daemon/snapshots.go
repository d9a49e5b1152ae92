package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// takeTarget is the agent a take request names and how long its capture may
// take (the request's timeout, else the daemon's).
func (d *Daemon) takeTarget(pid int, timeoutMS int64) (*agent, time.Duration, error) {
	a := d.agents.get(pid)
	if a == nil {
		return nil, 0, fail(errNoAgent, "process %d has no agent attached (start it under `vramscope run`, or call vramscope.attach() in it)", pid)
	}
	timeout := d.cfg.DumpTimeout
	if timeoutMS > 0 {
		timeout = time.Duration(timeoutMS) * time.Millisecond
	}
	return a, timeout, nil
}

func (s *session) snapshotTake(ctx context.Context, p api.TakeParams) (api.SnapshotResult, error) {
	d := s.d
	a, timeout, err := d.takeTarget(p.PID, p.TimeoutMS)
	if err != nil {
		return api.SnapshotResult{}, err
	}
	c, err := d.capture(ctx, a, captureReq{label: p.Label, reason: "request", timeout: timeout})
	if err != nil {
		return api.SnapshotResult{}, err
	}
	return d.snapshotResult(c.meta), nil
}

// commitStreamed stores a snapshot the agent streamed: the reader already
// wrote, hashed and analysed it.
func (d *Daemon) commitStreamed(part string, sr capture.Streamed, meta store.Meta) (store.Meta, error) {
	if sr.Err != nil {
		d.store.RemoveIncoming(part)
		if writingFailed(sr.Err, part) {
			return store.Meta{}, fail(errStoreFailed, "storing the streamed snapshot: %v", sr.Err)
		}
		analyze.LogPanic(d.cfg.Logf, sr.Err)
		return store.Meta{}, fail(errBadSnapshot, "the streamed snapshot: %v", sr.Err)
	}
	meta.Format = "vsm1"
	pr, err := d.store.PrepareHashed(part, sr.Size, sr.Sum)
	if err != nil {
		return store.Meta{}, fail(errStoreFailed, "%v", err)
	}
	d.analyses.CountDecode()
	return d.commitAnalysed(pr, meta, sr.Res)
}

// commitAnalysed commits a prepared snapshot, caches its analysis and tells
// subscribers.
func (d *Daemon) commitAnalysed(pr store.Prepared, meta store.Meta, res *analyze.Result) (store.Meta, error) {
	m, err := d.store.CommitPrepared(pr, meta)
	if err != nil {
		return store.Meta{}, fail(errStoreFailed, "%v", err)
	}
	d.analyses.Put(m.ID, res)
	d.events.publish(api.EventSnapshotStored, d.snapshotResult(m))
	return m, nil
}

// writingFailed says whether a stream failed at writing its part file (the
// disk is full, say) rather than at reading or decoding the stream: the
// pump's file errors name the part file.
func writingFailed(err error, part string) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Path == part
}

// commit analyses an incoming file (which also proves it is a snapshot),
// stores it, caches the analysis and tells subscribers. name is the file as
// the caller knows it, for errors: part may be a copy in the incoming dir.
func (d *Daemon) commit(part, name string, meta store.Meta) (store.Meta, error) {
	if err := d.checkIncoming(part); err != nil {
		return store.Meta{}, err
	}
	// Sync and hash the file while the engine reads it: both read it whole.
	type prepared struct {
		p   store.Prepared
		err error
	}
	prep := make(chan prepared, 1)
	go func() {
		p, err := d.store.Prepare(part)
		prep <- prepared{p, err}
	}()
	res, err := d.analyses.Compute(part)
	pr := <-prep
	if err != nil {
		d.store.Discard(pr.p)
		d.store.RemoveIncoming(part)
		return store.Meta{}, fail(errBadSnapshot, "%s", renamed(err, part, name))
	}
	if pr.err != nil {
		return store.Meta{}, fail(errStoreFailed, "%v", pr.err)
	}
	return d.commitAnalysed(pr.p, meta, res)
}

// renamed is err's message with the file the engine read (part) called by
// the name the caller knows (the file it asked to import, not the daemon's
// copy of it).
func renamed(err error, part, name string) string {
	return strings.ReplaceAll(err.Error(), part, name)
}

func inDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel)
}

func (s *session) agentCaptured(_ context.Context, p api.CapturedParams) (api.SnapshotResult, error) {
	a, err := s.currentAgent()
	if err != nil {
		return api.SnapshotResult{}, err
	}
	if err := checkCapturedBy(a, p.Path); err != nil {
		return api.SnapshotResult{}, err
	}
	proc := a.process()
	reason := p.Reason
	if reason == "" {
		reason = "agent"
	}
	meta := store.Meta{Reason: reason, Source: firstArg(proc.Argv), PID: proc.PID, Host: proc.Host,
		Rank: proc.Rank, Entries: p.Entries, TookMS: p.TookMS}
	meta.Device, meta.DeviceByNVML = a.nvmlOf(p.Device)
	// An OOM on one rank of a job captures the others into one group, at
	// once (not after this snapshot's analysis and commit): the group's ID
	// goes into this snapshot's meta, which joins the group once committed.
	var oomRank chan *store.Member
	if reason == "oom" {
		if group, others := s.d.oomGroup(a); len(others) > 0 {
			meta.Group, oomRank = group.ID, make(chan *store.Member, 1)
			go s.d.fanOutOOM(group, oomRank, others)
		}
	}
	at := capturedAt(time.Now().Add(-time.Duration(p.TookMS*float64(time.Millisecond))), p.DumpResult)
	s.d.nvmlAt(&meta, proc.PID, meta.Device)
	s.d.podMeta(&meta, proc.PID)
	s.d.addLevels(a, p.Levels) // before the commit, whose analysis reads them
	m, err := s.d.commit(p.Path, p.Path, meta)
	if err == nil {
		s.d.storeLevels(m)
	}
	if oomRank != nil {
		if err != nil {
			oomRank <- &store.Member{Rank: proc.Rank, PID: proc.PID} // no ID: not stored
		} else {
			oomRank <- &store.Member{Rank: m.Rank, PID: m.PID, ID: m.ID, CapturedMS: unixMS(at)}
		}
	}
	if err != nil {
		return api.SnapshotResult{}, err
	}
	r := s.d.snapshotResult(m)
	if reason == "oom" {
		go s.d.publishOOM(r, p.OOM)
	}
	return r, nil
}

// publishOOM analyses an OOM snapshot (the analysis is cached for the
// editor and the notebook that will ask next) and tells subscribers what
// filled the device. Off the agent's call: the agent is waiting at exit.
func (d *Daemon) publishOOM(r api.SnapshotResult, oom *api.OOMRaw) {
	ev := api.OOMEvent{Snapshot: r, OOM: oom}
	if res, err := d.analyses.Get(r.ID); err == nil {
		for _, f := range res.Findings {
			if f.Kind == analyze.KindOOM {
				ev.Title, ev.Fix, ev.KVCache = f.Title, f.Fix, oomKV(f.Evidence.Numbers)
				break
			}
		}
		if t := res.Tensors; t != nil {
			ev.NamedShare = t.NamedShare
			for i, g := range t.Groups {
				if i == 5 {
					break
				}
				ev.Named = append(ev.Named, api.NamedGroup{Name: g.Name, Kind: g.Kind, Bytes: g.Bytes, Tensors: g.Tensors})
			}
		}
	} else {
		d.cfg.Logf("oom snapshot %s not analysed: %v", r.ID, err)
	}
	d.events.publish(api.EventOOMCaptured, ev)
}

func (s *session) snapshotImport(_ context.Context, p api.ImportParams) (api.SnapshotResult, error) {
	path, err := importPath(p)
	if err != nil {
		return api.SnapshotResult{}, err
	}
	if err := importable(path); err != nil {
		return api.SnapshotResult{}, err
	}
	d := s.d
	part, err := d.store.Stage(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return api.SnapshotResult{}, fail(errBadSnapshot, "%v", err)
		}
		return api.SnapshotResult{}, fail(errStoreFailed, "%v", err)
	}
	m, err := d.commit(part, path, store.Meta{Reason: "import", Source: path, Label: p.Label})
	if err != nil {
		return api.SnapshotResult{}, err
	}
	return d.snapshotResult(m), nil
}

func (s *session) snapshotList(_ context.Context, p api.ListParams) (api.ListResult, error) {
	res := api.ListResult{Snapshots: []api.SnapshotResult{}}
	for _, m := range s.d.store.List() {
		if p.PID != 0 && m.PID != p.PID {
			continue
		}
		res.Snapshots = append(res.Snapshots, s.d.snapshotResult(m))
		if p.Limit > 0 && len(res.Snapshots) == p.Limit {
			break
		}
	}
	return res, nil
}

func (s *session) snapshotGet(_ context.Context, p api.IDParams) (api.SnapshotResult, error) {
	m, err := s.d.lookup(p.ID)
	if err != nil {
		return api.SnapshotResult{}, err
	}
	return s.d.snapshotResult(m), nil
}

func (d *Daemon) lookup(id string) (store.Meta, error) {
	m, ok := d.store.Get(id)
	if !ok {
		return store.Meta{}, fail(errNotFound, "no snapshot %q", id)
	}
	return m, nil
}

func (s *session) snapshotDelete(_ context.Context, p api.IDParams) (api.Empty, error) {
	m, err := s.d.lookup(p.ID)
	if err != nil {
		return api.Empty{}, err
	}
	if err := s.d.store.Delete(m.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return api.Empty{}, fail(errNotFound, "no snapshot %q", m.ID)
		}
		return api.Empty{}, fail(errStoreFailed, "%v", err)
	}
	return api.Empty{}, nil
}

// millis is d in milliseconds; ms formats it for the log.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", millis(d)) }

// oomKV is the KV cache an OOM finding's evidence describes, or nil.
func oomKV(n map[string]int64) *api.KVCache {
	if n["kv_cache_bytes"] <= 0 {
		return nil
	}
	return &api.KVCache{Bytes: n["kv_cache_bytes"], Batch: n["kv_batch"], Tokens: n["kv_tokens"],
		BytesPerToken: n["kv_bytes_per_token"], Limit: n["fit_limit"], MaxBatch: n["fit_max_batch"],
		MaxTokens: n["fit_max_tokens"]}
}
