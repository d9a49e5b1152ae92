package gpuphase

import (
	"math"
	"sort"
)

// Phase is a stretch of time of one device in one class.
type Phase struct {
	Device   int      `json:"device"`
	Start    int64    `json:"start"` // unix ms
	End      int64    `json:"end"`
	Class    string   `json:"class"`
	Evidence Evidence `json:"evidence"`
}

// Evidence is the phase's mean counters and the rule that named it.
type Evidence struct {
	Rule       string   `json:"rule"`
	Seconds    float64  `json:"seconds"`
	UtilGPU    *float64 `json:"util_gpu_pct,omitempty"`
	UtilMem    *float64 `json:"util_mem_pct,omitempty"`
	PowerW     *float64 `json:"power_w,omitempty"`
	PCIeMBps   *float64 `json:"pcie_mb_s,omitempty"` // rx + tx
	MemUsedGiB *float64 `json:"mem_used_gib,omitempty"`
	SMActive   *float64 `json:"sm_active_pct,omitempty"`
	DRAMBW     *float64 `json:"dram_bw_pct,omitempty"`
}

// Window is the length of the windows samples are averaged over before they
// are classified (NVML's slow counters tick once a second).
const Window = 1000

// minWindows is the shortest phase: a shorter run joins its neighbour.
const minWindows = 2

// Phases classifies the samples of every device, window by window, and
// merges neighbouring windows of one class into phases.
func Phases(samples []Sample) []Phase {
	byDev := map[int][]Sample{}
	for _, s := range samples {
		byDev[s.Device] = append(byDev[s.Device], s)
	}
	devs := make([]int, 0, len(byDev))
	for d := range byDev {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	var out []Phase
	for _, d := range devs {
		out = append(out, devicePhases(d, windows(byDev[d]))...)
	}
	return out
}

// windows averages the samples of one device over Window-long stretches.
func windows(ss []Sample) []Sample {
	sort.Slice(ss, func(i, j int) bool { return ss[i].TimeMS < ss[j].TimeMS })
	var out []Sample
	for i := 0; i < len(ss); {
		start := ss[i].TimeMS - ss[i].TimeMS%Window
		j := i
		for j < len(ss) && ss[j].TimeMS < start+Window {
			j++
		}
		out = append(out, mean(ss[i:j], start))
		i = j
	}
	return out
}

func mean(ss []Sample, t int64) Sample {
	m := blank(t, ss[0].Device)
	fields := func(s *Sample) []*float64 {
		return []*float64{&s.UtilGPU, &s.UtilMem, &s.PowerW, &s.RxMBps, &s.TxMBps, &s.MemUsedMiB, &s.MemTotalMiB, &s.SMActive, &s.DRAMBW}
	}
	out := fields(&m)
	for k := range out {
		var total float64
		n := 0
		for i := range ss {
			if v := *fields(&ss[i])[k]; !math.IsNaN(v) {
				total += v
				n++
			}
		}
		if n > 0 {
			*out[k] = total / float64(n)
		}
	}
	return m
}

func devicePhases(dev int, ws []Sample) []Phase {
	classes := make([]string, len(ws))
	rules := make([]string, len(ws))
	for i, w := range ws {
		classes[i], rules[i] = classify(w)
	}
	smooth(classes)
	var out []Phase
	for i := 0; i < len(ws); {
		j := i
		for j < len(ws) && classes[j] == classes[i] {
			j++
		}
		p := Phase{Device: dev, Start: ws[i].TimeMS, End: ws[j-1].TimeMS + Window, Class: classes[i]}
		p.Evidence = evidence(ws[i:j], classes[i])
		for k := i; k < j; k++ {
			if c, r := classify(ws[k]); c == classes[i] {
				p.Evidence.Rule = r
				break
			}
		}
		out = append(out, p)
		i = j
	}
	return out
}

// smooth folds runs shorter than minWindows into the longer neighbour: a
// one-second blip between two phases is a transition, not a phase.
func smooth(c []string) {
	for i := 0; i < len(c); {
		j := i
		for j < len(c) && c[j] == c[i] {
			j++
		}
		if j-i < minWindows && len(c) > minWindows {
			var repl string
			switch {
			case i > 0 && j < len(c):
				repl = c[i-1]
				if runLen(c, j) > runLen(c, i-1) {
					repl = c[j]
				}
			case i > 0:
				repl = c[i-1]
			case j < len(c):
				repl = c[j]
			}
			if repl != "" {
				for k := i; k < j; k++ {
					c[k] = repl
				}
			}
		}
		i = j
	}
}

func runLen(c []string, at int) int {
	n := 1
	for k := at + 1; k < len(c) && c[k] == c[at]; k++ {
		n++
	}
	for k := at - 1; k >= 0 && c[k] == c[at]; k-- {
		n++
	}
	return n
}

func evidence(ws []Sample, class string) Evidence {
	m := mean(ws, 0)
	e := Evidence{Seconds: float64(len(ws)) * Window / 1000}
	opt := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		r := math.Round(v*10) / 10
		return &r
	}
	e.UtilGPU, e.UtilMem, e.PowerW = opt(m.UtilGPU), opt(m.UtilMem), opt(m.PowerW)
	if !math.IsNaN(m.RxMBps) || !math.IsNaN(m.TxMBps) {
		e.PCIeMBps = opt(sum(m.RxMBps, m.TxMBps))
	}
	if !math.IsNaN(m.MemUsedMiB) {
		e.MemUsedGiB = opt(m.MemUsedMiB / 1024)
	}
	e.SMActive, e.DRAMBW = opt(m.SMActive), opt(m.DRAMBW)
	return e
}
