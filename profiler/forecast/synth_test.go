package forecast

import (
	"math/rand/v2"
	"testing"
)

const mib = 1 << 20

// levelsOf makes n levels, one every dt seconds, whose peak is peak(i).
func levelsOf(n int, dt float64, peak func(i int) int64) []Level {
	out := make([]Level, n)
	for i := range out {
		p := peak(i)
		out[i] = Level{Step: i, TimeS: float64(i) * dt, Allocated: p * 3 / 4, Reserved: p + 64*mib, Peak: p}
	}
	return out
}

// neverGrowing projects every prefix of levels, as a daemon that sees the
// levels arrive would, and fails at the first that projects a full device.
func neverGrowing(t *testing.T, levels []Level, capacity int64) {
	t.Helper()
	for n := 10; n <= len(levels); n += 10 {
		if pr := Project(levels[:n], capacity, Default()); pr.Growing {
			t.Fatalf("after %d steps: projected full at step %d (%.0f B/step, %+v)", n, pr.Step, pr.BytesPerStep, pr.Evidence)
		}
	}
}

// tight is a capacity 5% over the highest peak: the healthy run almost fills it.
func tight(levels []Level) int64 {
	var top int64
	for _, l := range levels {
		top = max(top, l.peak())
	}
	return top + top/20
}

func TestHealthySynthetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	noise := func(sd float64) int64 { return int64(r.NormFloat64() * sd) }
	cases := map[string]func(i int) int64{
		// 4 micro-batches per optimizer step: gradients fill, then are freed.
		"sawtooth4": func(i int) int64 { return 2048*mib + int64(i%4)*200*mib + noise(2*mib) },
		// 16 micro-batches, a long cycle against the 16-step windows.
		"sawtooth16": func(i int) int64 { return 2048*mib + int64(i%16)*60*mib + noise(2*mib) },
		// batch lengths from 64 to 1024 tokens: peak proportional to length.
		"varlen": func(i int) int64 { return 1024*mib + int64(64+r.IntN(961))*mib },
		// a long-tailed length mix: rare long batches.
		"varlen_tail": func(i int) int64 {
			if r.Float64() < 0.02 {
				return 3000 * mib
			}
			return 1024*mib + int64(r.IntN(512))*mib
		},
		// every 100 steps, an eval pass of 20 steps at a higher peak.
		"eval": func(i int) int64 {
			if i%120 >= 100 {
				return 3072*mib + noise(8*mib)
			}
			return 2048*mib + noise(8*mib)
		},
		// optimizer state at step 1, a cache that fills over 150 steps, then flat.
		"warmup": func(i int) int64 {
			p := int64(1024 * mib)
			if i >= 1 {
				p += 600 * mib
			}
			return p + int64(min(i, 150))*4*mib + noise(4*mib)
		},
		// one jump at step 1000 (longer sequences from then on), flat after.
		"jump": func(i int) int64 {
			if i >= 1000 {
				return 2560*mib + noise(4*mib)
			}
			return 2048*mib + noise(4*mib)
		},
		// noise only.
		"noise": func(i int) int64 { return 2048*mib + noise(100*mib) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			lv := levelsOf(3000, 0.05, f)
			neverGrowing(t, lv, tight(lv))
		})
	}
}

// TestSlowGrowth: a leak of 1 MiB a step under a saw-tooth, batch lengths
// and noise is projected, and the projected step is near the true one.
func TestSlowGrowth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	capacity := int64(4096 * mib)
	peak := func(i int) int64 {
		return 1536*mib + int64(i)*mib + int64(i%4)*50*mib + int64(r.IntN(200))*mib
	}
	lv := levelsOf(1200, 0.07, peak)
	pr := Project(lv, capacity, Default())
	if !pr.Growing {
		t.Fatalf("no projection: %s", pr.Why)
	}
	// The window maxima ride the top of the noise: 1536+200+150 MiB + i MiB reaches 4096 MiB near step 2210.
	if pr.Step < 2000 || pr.Step > 2400 {
		t.Errorf("projected full at step %d, want about 2210 (%+v)", pr.Step, pr)
	}
	if pr.BytesPerStep < 0.8*mib || pr.BytesPerStep > 1.2*mib {
		t.Errorf("rate %.0f B/step, want about 1 MiB", pr.BytesPerStep)
	}
	if want := pr.BytesPerStep / 0.07; pr.BytesPerSecond < 0.99*want || pr.BytesPerSecond > 1.01*want {
		t.Errorf("rate %.0f B/s, want %.0f", pr.BytesPerSecond, want)
	}
	if pr.SecondsLeft <= 0 || pr.TimeS != pr.LastTimeS+pr.SecondsLeft {
		t.Errorf("times: %+v", pr)
	}
}

// TestLateLeak: a leak that starts after 3,000 flat steps is seen on a
// short span, long before the 3,200-step span would show it.
func TestLateLeak(t *testing.T) {
	peak := func(i int) int64 { return 2048*mib + int64(max(i-3000, 0))*2*mib + int64(i%4)*20*mib }
	lv := levelsOf(3400, 0.05, peak)
	pr := Project(lv, 4096*mib, Default())
	if !pr.Growing {
		t.Fatalf("no projection: %s", pr.Why)
	}
	if pr.Evidence.FromStep < 3000 {
		t.Errorf("evidence from step %d, before the leak began", pr.Evidence.FromStep)
	}
}

// TestGrowthStopped: once a growth stops, the projection goes, even while
// the longer spans still show it.
func TestGrowthStopped(t *testing.T) {
	peak := func(i int) int64 { return 1024*mib + int64(min(i, 1500))*mib }
	lv := levelsOf(1800, 0.05, peak)
	if pr := Project(lv[:1500], 4096*mib, Default()); !pr.Growing {
		t.Fatalf("no projection while it grew: %s", pr.Why)
	}
	if pr := Project(lv, 4096*mib, Default()); pr.Growing {
		t.Errorf("projected after the growth stopped: %+v", pr)
	}
}

func TestTooLittle(t *testing.T) {
	lv := levelsOf(200, 0.05, func(i int) int64 { return 1024*mib + int64(i)*10*mib })
	if pr := Project(lv, 4096*mib, Default()); pr.Growing || pr.Why == "" {
		t.Errorf("200 levels (150 after warm-up) projected: %+v", pr)
	}
	if pr := Project(nil, 4096*mib, Default()); pr.Growing {
		t.Errorf("no levels projected: %+v", pr)
	}
}

// TestRestart: levels of an earlier run (the step count goes back) do not count.
func TestRestart(t *testing.T) {
	grow := levelsOf(1000, 0.05, func(i int) int64 { return 1024*mib + int64(i)*mib })
	flat := levelsOf(300, 0.05, func(i int) int64 { return 1024 * mib })
	if pr := Project(append(grow, flat...), 4096*mib, Default()); pr.Growing {
		t.Errorf("an earlier run's growth projected: %+v", pr)
	}
}

// TestTailIsEnough: Project reads only the last max(Spans) levels after
// warm-up, so a caller may pass a long run's tail and get the same answer.
func TestTailIsEnough(t *testing.T) {
	lv := levelsOf(10000, 0.05, func(i int) int64 { return 2048*mib + int64(max(i-8000, 0))*mib + int64(i%4)*20*mib })
	whole := Project(lv, 8192*mib, Default())
	tail := Project(lv[len(lv)-3200:], 8192*mib, Default())
	if !whole.Growing || whole != tail {
		t.Errorf("whole run: %+v\ntail: %+v", whole, tail)
	}
}
