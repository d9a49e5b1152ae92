package idle

import (
	"sort"
)

// Join splits the idle time of in's GPU into causes and lines (see the
// package comment). in.Util and in.Samples are in time order.
func Join(in Input, o Options) Report {
	o = o.withDefaults()
	main := mainThread(in.Samples)
	ws := covered(windows(in.Util, o), main, in.PeriodMS)
	t := newTally()
	for _, w := range ws {
		lo := sort.Search(len(main), func(i int) bool { return main[i].TimeMS > w.fromMS })
		hi := sort.Search(len(main), func(i int) bool { return main[i].TimeMS > w.toMS })
		t.window(w)
		ss := main[lo:hi]
		if len(ss) == 0 && lo > 0 && w.fromMS-main[lo-1].TimeMS <= o.MaxGapMS {
			// The sampler missed every tick (a C call that held the GIL, as
			// torch.save's writes do): the thread is where it was last seen.
			ss = main[lo-1 : lo]
		}
		attribute(w, ss, t)
	}
	return t.report(in, o)
}

// mainThread keeps the training thread's samples.
func mainThread(ss []Sample) []Sample {
	var out []Sample
	for _, s := range ss {
		if s.Main {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TimeMS < out[j].TimeMS })
	return out
}

// covered keeps the windows the training thread's samples span: a window
// that begins before the first sample or ends after the last (beyond two
// sampling periods) is outside what the agent saw, not idle without samples.
func covered(ws []window, main []Sample, periodMS float64) []window {
	if len(main) == 0 {
		return nil
	}
	slack := int64(2 * max(periodMS, 50))
	first, last := main[0].TimeMS-slack, main[len(main)-1].TimeMS+slack
	var out []window
	for _, w := range ws {
		if w.fromMS >= first && w.toMS <= last {
			out = append(out, w)
		}
	}
	return out
}

// noFrame stands for a sample without user frames.
var noFrame = Frame{File: "(library code)"}

// top is the innermost user frame of a sample: the line it was on.
func top(s Sample) Frame {
	if len(s.Stack) == 0 {
		return noFrame
	}
	return s.Stack[0]
}

// attribute gives a window's idle time to its samples. Samples in a sync wait
// for the GPU (it works meanwhile), so the idle time goes to the others;
// Python-side samples beside a sync are the sync's: without it the host
// would have queued work ahead.
func attribute(w window, ss []Sample, t *tally) {
	if w.idleMS <= 0 {
		return
	}
	if len(ss) == 0 {
		t.add(CauseNoSamples, noFrame, noFrame, w.idleMS, false)
		return
	}
	sync, hasSync := syncSite(ss)
	host := 0
	for _, s := range ss {
		if s.Wait != WaitSync {
			host++
		}
	}
	if host == 0 { // idle while in the sync itself
		for _, s := range ss {
			t.add(CauseSync, top(s), top(s), w.idleMS/float64(len(ss)), false)
		}
		return
	}
	each := w.idleMS / float64(host)
	for _, s := range ss {
		if s.Wait == WaitSync {
			continue
		}
		k, site := kindOf(s.Wait), top(s)
		if k == CausePython && hasSync {
			k, site = CauseSync, sync
		}
		t.add(k, site, top(s), each, s.Wait == WaitWorkers)
	}
}

// syncSite is the line most of a window's sync samples were on.
func syncSite(ss []Sample) (Frame, bool) {
	n := map[Frame]int{}
	var best Frame
	for _, s := range ss {
		if s.Wait != WaitSync {
			continue
		}
		f := top(s)
		n[f]++
		if n[f] > n[best] || (n[f] == n[best] && less(f, best)) {
			best = f
		}
	}
	return best, len(n) > 0
}

func less(a, b Frame) bool {
	if a.File != b.File {
		return a.File < b.File
	}
	return a.Line < b.Line
}
