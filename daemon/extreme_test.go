package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// TestExtremeTimes: the crafted snapshot of round 2's High defect (time_us
// -2^63 and 2^62; its timeline index overflowed and the panic ended the
// daemon), imported and handed over by an agent, over the real socket. Each
// is refused as a bad snapshot naming the file and the field, and the
// daemon goes on: a real snapshot imports after them.
func TestExtremeTimes(t *testing.T) {
	d, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	ag := fakeAgent(t, cfg.Socket, 7171, nil)
	b := hostile.ExtremeTimes()
	bad := hostile.Write(t, "crafted.pickle", b)
	err := c.Call(context.Background(), api.SnapshotImport, api.ImportParams{Path: bad}, nil)
	wantBad(t, "snapshot.import", err, bad)
	part := filepath.Join(d.store.IncomingDir(), "7171-oom.part")
	if err := os.WriteFile(part, b, 0o600); err != nil {
		t.Fatal(err)
	}
	err = ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: part}, Reason: "oom"}, nil)
	wantBad(t, "agent.captured", err, part)
	for name, b := range hostile.Extremes() {
		err := c.Call(context.Background(), api.SnapshotImport, api.ImportParams{Path: hostile.Write(t, name+".pickle", b)}, nil)
		wantBad(t, name, err, name+".pickle")
	}
	r := importFixture(t, c, "gpt2_train.pickle")
	var sum struct{ Events int64 }
	call(t, c, api.AnalysisSummary, api.IDParams{ID: r.ID}, &sum)
	if sum.Events == 0 {
		t.Errorf("the good snapshot after the crafted ones: %+v", sum)
	}
}

func wantBad(t *testing.T, what string, err error, file string) {
	t.Helper()
	code := client.Code(err)
	var re *jsonrpc2.Error
	if errors.As(err, &re) { // the agent's connection
		code = re.Code
	}
	if err == nil || code != api.CodeBadSnapshot || !strings.Contains(err.Error(), file) ||
		!strings.Contains(err.Error(), "entry ") || strings.Contains(err.Error(), "internal error") {
		t.Errorf("%s: %v, want a bad-snapshot error naming %s and the entry", what, err, file)
	}
}

// TestAnalysisPanicAnswered: a panic on the goroutine that analyses a stored
// snapshot (here in the daemon's own follow-up, made to panic) is answered
// as an error naming the file, logged with its stack, and the daemon goes
// on answering.
func TestAnalysisPanicAnswered(t *testing.T) {
	var mu sync.Mutex
	var log strings.Builder
	d, cfg := testDaemon(t, func(c *Config) {
		c.Logf = func(f string, a ...any) { mu.Lock(); fmt.Fprintf(&log, f+"\n", a...); mu.Unlock() }
	})
	c := dial(t, cfg.Socket)
	r := importFixture(t, c, "gpt2_train.pickle")
	d.analyses.Drop(r.ID)
	d.analyses.Augment = func(string, *analyze.Result) { panic("a broken invariant") }
	err := c.Call(context.Background(), api.AnalysisFlame, api.FlameParams{ID: r.ID}, nil)
	path := d.store.Path(r.ID)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "a broken invariant") {
		t.Fatalf("analysis.flame: %v, want an internal error naming %s", err, path)
	}
	mu.Lock()
	logged := log.String()
	mu.Unlock()
	if !strings.Contains(logged, path+": internal error") || !strings.Contains(logged, "goroutine ") {
		t.Errorf("the log has no stack for the panic: %s", logged)
	}
	// A capture's analysis goes through the same follow-up (on a job's
	// capture goroutines, not a request's): the snapshot is stored without it.
	r2 := importFixture(t, c, "oom_batch.pickle")
	if !d.analyses.Cached(r2.ID) {
		t.Error("the snapshot imported while the follow-up panics was not kept")
	}
	mu.Lock()
	logged = log.String()
	mu.Unlock()
	if !strings.Contains(logged, d.store.Path(r2.ID)+": internal error") {
		t.Errorf("the follow-up's panic on import was not logged: %s", logged)
	}
	d.analyses.Augment = nil
	call(t, c, api.AnalysisFlame, api.FlameParams{ID: r.ID}, nil)
}

// TestNaNDuration: a tensor walk whose took_ms is NaN (JSON has no NaN:
// analysis.summary failed with error code 0, analysis.report with -32603)
// imports, and both answer.
func TestNaNDuration(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	var r api.SnapshotResult
	call(t, c, api.SnapshotImport, api.ImportParams{Path: hostile.Write(t, "nan.pickle", hostile.NaNDuration())}, &r)
	var sum struct {
		Tensors *struct {
			TookMS *float64 `json:"walk_ms"`
		} `json:"named_tensors"`
	}
	call(t, c, api.AnalysisSummary, api.IDParams{ID: r.ID}, &sum)
	if sum.Tensors == nil || sum.Tensors.TookMS == nil || *sum.Tensors.TookMS != 0 {
		t.Errorf("summary's named_tensors: %+v, want walk_ms 0", sum.Tensors)
	}
	call(t, c, api.AnalysisReport, api.IDParams{ID: r.ID}, nil)
}

// TestCacheBoundedByBytes: analyses of snapshots of many lines of their own
// (300,000 held 210 MB each; the cache kept eight) are kept while their
// weight fits the budget, the least recently used dropped first and the
// latest always kept.
func TestCacheBoundedByBytes(t *testing.T) {
	d, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	one, err := analyze.FromBytes("x", hostile.ManyLines(20_000), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.analyses.SetMaxBytes(2*one.Footprint() + one.Footprint()/2) // room for two
	var ids []string
	for i := 0; i < 4; i++ {
		var r api.SnapshotResult
		path := hostile.Write(t, fmt.Sprintf("many%d.pickle", i), hostile.ManyLines(20_000+i))
		call(t, c, api.SnapshotImport, api.ImportParams{Path: path}, &r)
		ids = append(ids, r.ID)
	}
	bytes, max, n := d.analyses.Held()
	if n != 2 || bytes > max || !d.analyses.Cached(ids[3]) || !d.analyses.Cached(ids[2]) || d.analyses.Cached(ids[0]) {
		t.Errorf("%d analyses of %d bytes kept (budget %d); cached: %v %v %v %v", n, bytes, max,
			d.analyses.Cached(ids[0]), d.analyses.Cached(ids[1]), d.analyses.Cached(ids[2]), d.analyses.Cached(ids[3]))
	}
	d.analyses.SetMaxBytes(1) // less than any: the latest alone stays
	var sum struct {
		SitesMore int `json:"sites_more"`
	}
	call(t, c, api.AnalysisSummary, api.IDParams{ID: ids[0]}, &sum) // from the summary on disk
	call(t, c, api.AnalysisFlame, api.FlameParams{ID: ids[0]}, nil) // analysed anew
	if sum.SitesMore != 20_000-analyze.MaxSummarySites || !d.analyses.Cached(ids[0]) || d.analyses.Cached(ids[3]) {
		t.Errorf("summary's sites_more %d; cached: %v %v", sum.SitesMore, d.analyses.Cached(ids[0]), d.analyses.Cached(ids[3]))
	}
}
