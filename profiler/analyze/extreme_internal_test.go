package analyze

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/vramscope/vramscope/profiler"
)

// TestTimelineExtremeTimes: the timeline and the moments grid take times at
// both ends of int64 without a negative index (-2^63 then 2^62 panicked),
// keep within their bounds, and keep their points in time order.
func TestTimelineExtremeTimes(t *testing.T) {
	times := []int64{math.MinInt64, 1 << 62, math.MinInt64 + 1, 0, math.MaxInt64, math.MaxInt64}
	tl, m := newTimeline(), newMomentGrid()
	for i, at := range times {
		tl.add(at, int64(i)*512, 0)
		m.add(at, momentKey{origin: 1}, 512)
	}
	out := tl.result(0, 0, 0, nil)
	if n := len(out.Points); n == 0 || n > MaxTimelinePoints {
		t.Fatalf("%d points", n)
	}
	for i := 1; i < len(out.Points); i++ {
		if out.Points[i].TimeUS < out.Points[i-1].TimeUS {
			t.Fatalf("point %d at %d before point %d at %d", i, out.Points[i].TimeUS, i-1, out.Points[i-1].TimeUS)
		}
	}
	if last := out.Points[len(out.Points)-1]; last.Allocated != int64(len(times)-1)*512 {
		t.Errorf("last point %+v, want the last level %d", last, (len(times)-1)*512)
	}
	m.flush()
	if len(m.buckets) > 2*MaxMoments {
		t.Errorf("%d moment buckets", len(m.buckets))
	}
}

// TestReplayPanicIsAnError: a panic on the replay goroutine comes back as a
// *PanicError from the pipe, the decoder's next event gets it too (so it
// stops reading), and the process lives on.
func TestReplayPanicIsAnError(t *testing.T) {
	frames := profiler.NewFrames()
	a := &analysis{frames: frames, origins: newOrigins(frames)}
	a.trackers = []*tracker{{a: a}} // no live map, no timeline: the replay panics
	p := a.pipe()
	e := profiler.Event{Action: profiler.ActAlloc, Size: 512}
	for i := 0; i < batchSize; i++ { // a full batch goes to the replay
		if err := p.event(0, &e); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); p.err() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replay's panic never came back")
		}
	}
	stopped := p.event(0, &e)
	p.close()
	var pe *PanicError
	if !errors.As(p.err(), &pe) || len(pe.Stack) == 0 {
		t.Fatalf("pipe error %v, want a *PanicError with its stack", p.err())
	}
	if !errors.As(stopped, &pe) {
		t.Errorf("the decoder was not stopped: its last event returned %v", stopped)
	}
	p.close() // run defers a second close: it must not block or panic
}
