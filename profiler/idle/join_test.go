package idle

import (
	"math"
	"testing"
)

var (
	loopLine  = Frame{File: "train.py", Line: 40, Func: "main"}
	xformLine = Frame{File: "data.py", Line: 12, Func: "jitter"}
	itemLine  = Frame{File: "train.py", Line: 50, Func: "main"}
	bookLine  = Frame{File: "train.py", Line: 53, Func: "main"}
	fwdLine   = Frame{File: "train.py", Line: 45, Func: "main"}
)

// series makes n one-second windows starting at t0 with utilization.gpu
// util and no GPM; samples every 40 ms from pick(i).
func series(n int, util float64, pick func(k int) (Frame, Wait)) Input {
	in := Input{PID: 7, PeriodMS: 40}
	for i := 0; i <= n; i++ {
		in.Util = append(in.Util, Util{TimeMS: int64(1000 * i), GPU: util, SMActive: -1, PCIeMBps: -1})
	}
	for k, t := 0, int64(20); t < int64(1000*n); k, t = k+1, t+40 {
		f, w := pick(k)
		in.Samples = append(in.Samples, Sample{TimeMS: t, Thread: "MainThread", Main: true, Stack: []Frame{f, loopLine}, Wait: w})
	}
	return in
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestDataLoaderIdle(t *testing.T) {
	in := series(10, 30, func(k int) (Frame, Wait) {
		if k%4 == 3 {
			return fwdLine, WaitNone
		}
		return xformLine, WaitDataLoader
	})
	r := Join(in, Options{})
	if !near(r.IdleShare, 0.7) {
		t.Fatalf("idle share %v, want 0.7", r.IdleShare)
	}
	c := r.Finding()
	if c == nil || c.Kind != CauseDataLoader || c.Site.Frame != xformLine {
		t.Fatalf("finding %+v, want the data loader at %v", c, xformLine)
	}
	if math.Abs(c.Share-0.7*0.75) > 0.01 {
		t.Errorf("data loader share %v, want about %v (3 of 4 host samples)", c.Share, 0.7*0.75)
	}
	if got := r.Headline(); got != "GPU idle 70% of 10 s: waiting for the data loader at data.py:12 (53%)" {
		t.Errorf("headline %q", got)
	}
}

func TestSyncOwnsPythonBesideIt(t *testing.T) {
	in := series(5, 60, func(k int) (Frame, Wait) {
		if k%2 == 0 {
			return itemLine, WaitSync
		}
		return bookLine, WaitNone
	})
	r := Join(in, Options{})
	c := r.Finding()
	if c == nil || c.Kind != CauseSync || c.Site.Frame != itemLine {
		t.Fatalf("finding %+v, want the sync at %v", c, itemLine)
	}
	if len(c.Lines) != 1 || c.Lines[0].Frame != bookLine {
		t.Errorf("lines %+v, want only the bookkeeping line (the sync samples waited on a busy GPU)", c.Lines)
	}
	if !near(c.Share, 0.4) {
		t.Errorf("share %v, want 0.4", c.Share)
	}
}

func TestBusyGPUHasNoFinding(t *testing.T) {
	in := series(10, 97, func(int) (Frame, Wait) { return fwdLine, WaitNone })
	r := Join(in, Options{})
	if r.Finding() != nil || r.Headline() != "" {
		t.Fatalf("finding %+v at %.0f%% idle, want none", r.Finding(), 100*r.IdleShare)
	}
}

func TestCopyReadsBusyButIsIdle(t *testing.T) {
	in := series(4, 97, func(int) (Frame, Wait) { return Frame{File: "train.py", Line: 60}, WaitCheckpoint })
	for i := range in.Util {
		in.Util[i].SMActive = 1
	}
	r := Join(in, Options{})
	if r.CopyMS != 4000 || !near(r.IdleShare, 0.99) {
		t.Fatalf("copy %v ms, idle %v: a copy that utilization.gpu reads busy is idle for compute", r.CopyMS, r.IdleShare)
	}
	if c := r.Finding(); c == nil || c.Kind != CauseCheckpoint {
		t.Fatalf("finding %+v, want checkpoint", c)
	}
}

func TestWindowsOutsideTheSamplesAreLeftOut(t *testing.T) {
	in := series(10, 0, func(int) (Frame, Wait) { return fwdLine, WaitNone })
	in.Samples = in.Samples[100:150] // 4.02-5.98 s
	r := Join(in, Options{})
	if r.WallMS != 2000 || r.FromMS != 4000 || r.ToMS != 6000 {
		t.Fatalf("windows %d-%d ms (%v ms), want 4000-6000: those the samples span", r.FromMS, r.ToMS, r.WallMS)
	}
	if len(r.Causes) != 1 || r.Causes[0].Kind != CausePython {
		t.Fatalf("causes %+v", r.Causes)
	}
}

func TestGapsAndMissedWindows(t *testing.T) {
	save := Frame{File: "train.py", Line: 70, Func: "main"}
	in := series(6, 50, func(int) (Frame, Wait) { return fwdLine, WaitNone })
	var kept []Sample
	for _, s := range in.Samples {
		switch {
		case s.TimeMS > 900 && s.TimeMS <= 1000: // last seen in torch.save, then no tick until 2 s
			s.Stack[0], s.Wait = save, WaitCheckpoint
			kept = append(kept, s)
		case s.TimeMS < 1000 || s.TimeMS > 2000:
			kept = append(kept, s)
		}
	}
	in.Samples = kept
	in.Util = append(in.Util[:3], in.Util[5:]...) // no reading at 3 s and 4 s: 2-5 s is no window
	r := Join(in, Options{MaxGapMS: 2000})
	if r.WallMS != 3000 {
		t.Fatalf("wall %v ms, want 3 windows (a 3 s gap is not one)", r.WallMS)
	}
	byKind := map[Kind]Cause{}
	for _, c := range r.Causes {
		byKind[c.Kind] = c
	}
	// 0-1 s: 0.5 s idle, 2 of 25 samples in the save; 1-2 s: missed, the save's; 5-6 s: python.
	if c := byKind[CauseCheckpoint]; !near(c.IdleMS, 500+500*2.0/25) || c.Site.Frame != save {
		t.Errorf("checkpoint %+v, want the missed window and 2 samples of the first", c)
	}
	if _, ok := byKind[CauseNoSamples]; ok {
		t.Errorf("no_samples %+v: the missed window follows a sample 0 s before it", byKind[CauseNoSamples])
	}
	in.Samples = in.Samples[:len(in.Samples)-25] // nothing after 5 s: 5-6 s is outside the samples
	if r := Join(in, Options{}); r.ToMS > 5000 {
		t.Errorf("windows up to %d ms, after the last sample", r.ToMS)
	}
}

// A span's join holds the windows inside it only: the counters report joins
// each phase this way.
func TestSpan(t *testing.T) {
	in := series(10, 30, func(k int) (Frame, Wait) {
		if k < 100 { // 0-4 s in the transform, then Python-side
			return xformLine, WaitDataLoader
		}
		return fwdLine, WaitNone
	})
	r := Join(in.Span(0, 4000), Options{})
	if r.FromMS != 0 || r.ToMS != 4000 || len(r.Causes) != 1 || r.Causes[0].Kind != CauseDataLoader {
		t.Fatalf("0-4 s: %d-%d ms, causes %+v", r.FromMS, r.ToMS, r.Causes)
	}
	r = Join(in.Span(4000, 10000), Options{})
	if r.FromMS != 4000 || r.WallMS != 6000 || len(r.Causes) != 1 || r.Causes[0].Kind != CausePython {
		t.Fatalf("4-10 s: %d-%d ms, causes %+v", r.FromMS, r.ToMS, r.Causes)
	}
}
