package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// heldDecode makes the next decode of d block at its first read until
// release is closed; started is closed once it blocks there.
func heldDecode(d *Daemon) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.analyses.SetProgress(func(done, total int64) {
		once.Do(func() { close(started); <-release })
	})
	return started, release
}

// waitState polls a state of the daemon for up to ten seconds.
func waitState(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, 10*time.Second, what, func() (bool, string) { return cond(), "not yet" })
}

// TestGoneRequestStopsItsDecode: a request for an analysis that is cancelled
// ($/cancelRequest, sent by the client when ctx ends) or whose connection
// closes stops the decode no one else waits for; the stopped analysis is not
// cached and the next request decodes afresh.
func TestGoneRequestStopsItsDecode(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			d, cfg := testDaemon(t)
			a := importFixture(t, dial(t, cfg.Socket), "oom_batch.pickle")
			d.analyses.Drop(a.ID)
			before := d.analyses.Runs()
			started, release := heldDecode(d)
			c, err := client.Dial(context.Background(), cfg.Socket, "test")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- c.Call(ctx, api.AnalysisTimeline, api.TimelineParams{ID: a.ID}, new(analyze.Timeline)) }()
			<-started
			e := d.analyses.Probe(a.ID)
			if how == "cancel" {
				cancel()
			} else {
				c.Close()
			}
			if err := <-errc; err == nil {
				t.Fatal("the call returned a result")
			}
			waitState(t, "the daemon to stop the decode", func() bool {
				return e.Stopped()
			})
			close(release)
			if err := e.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("the decode ended with %v, want context.Canceled", err)
			}
			var tl analyze.Timeline
			call(t, dial(t, cfg.Socket), api.AnalysisTimeline, api.TimelineParams{ID: a.ID}, &tl)
			if runs := d.analyses.Runs() - before; runs != 2 || len(tl.Points) == 0 {
				t.Errorf("%d decodes (want 2: the stopped one and a fresh one), %d timeline points", runs, len(tl.Points))
			}
		})
	}
}

// TestCancelKeepsSharedDecode: one of two requests waiting for the same
// decode goes; the decode goes on for the other.
func TestCancelKeepsSharedDecode(t *testing.T) {
	d, cfg := testDaemon(t)
	a := importFixture(t, dial(t, cfg.Socket), "oom_batch.pickle")
	d.analyses.Drop(a.ID)
	before := d.analyses.Runs()
	started, release := heldDecode(d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone, stays := dial(t, cfg.Socket), dial(t, cfg.Socket)
	errc := make(chan error, 2)
	go func() {
		errc <- gone.Call(ctx, api.AnalysisTimeline, api.TimelineParams{ID: a.ID}, new(analyze.Timeline))
	}()
	<-started
	e := d.analyses.Probe(a.ID)
	var tl analyze.Timeline
	go func() {
		errc <- stays.Call(context.Background(), api.AnalysisTimeline, api.TimelineParams{ID: a.ID}, &tl)
	}()
	waitState(t, "two requests to wait for the decode", func() bool {
		return e.Waiters() == 2
	})
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	waitState(t, "the daemon to see the cancel", func() bool {
		return e.Waiters() == 1
	})
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if e.Stopped() || len(tl.Points) == 0 || d.analyses.Runs()-before != 1 {
		t.Errorf("stopped %v, %d points, %d decodes: the remaining request should get the one decode", e.Stopped(), len(tl.Points), d.analyses.Runs()-before)
	}
}
