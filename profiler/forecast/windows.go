package forecast

// windowMaxima splits the steps levels span into consecutive windows of size
// steps (the oldest steps that do not fill a window are left out, so the last
// window ends at the last level) and returns, for each window that holds a
// level, the centre of its levels' steps, their maximum of s and maximum
// reserved bytes. Windows count steps, not levels: between the allocator's
// reads the agent leaves steps unmeasured (on the H200's 70 ms steps, run of
// 2026-12-04, it read one step in 11-18 and a span of 200 steps held 14 levels,
// not one window of 16), and a read step's peak covers the steps since the
// read before it.
func windowMaxima(levels []Level, size int, s series) []point {
	var pts []point
	if len(levels) == 0 || size <= 0 {
		return nil
	}
	end := len(levels)
	for hi := levels[end-1].Step; hi-size+1 >= levels[0].Step; hi -= size {
		start := end
		for start > 0 && levels[start-1].Step > hi-size {
			start--
		}
		w := levels[start:end]
		end = start
		if len(w) == 0 {
			continue
		}
		var top, res int64
		for _, l := range w {
			top, res = max(top, s.value(l)), max(res, l.Reserved)
		}
		centre := float64(w[0].Step+w[len(w)-1].Step) / 2
		pts = append(pts, point{x: centre, y: float64(top), r: float64(res)})
	}
	for i, j := 0, len(pts)-1; i < j; i, j = i+1, j-1 {
		pts[i], pts[j] = pts[j], pts[i]
	}
	return pts
}

// windowSize is the steps per window for a span of n steps.
func (p Params) windowSize(n int) int {
	return max(p.MinWindowSteps, n/p.Windows)
}

// maxGapShare bounds cacheGap as a share of the capacity. The allocator
// fails when reserved, not the peak, reaches a cap it cannot free below: the
// H200 leak (testdata/leak.json) ran out with its peak 306 MiB (10%) under
// its 3 GiB cap and reserved at the cap, a gap it held all run. A much
// larger cache is mostly free segments that the allocator releases before
// it fails (the varlen run held 33 GiB reserved for 6 GiB peaks, uncapped),
// so no more than 15% of the capacity counts.
const maxGapShare = 0.15

// cacheGap is what the caching allocator holds beyond the step peak in the
// last windows: the median of reserved minus peak over pts' last third, at
// least 0 and at most maxGapShare of capacity. The peak's trend is
// projected to the capacity less this gap.
func cacheGap(pts []point, capacity int64) int64 {
	last := thirds(pts)[2]
	gaps := make([]float64, len(last))
	for i, p := range last {
		gaps[i] = max(p.r-p.y, 0)
	}
	return min(int64(median(gaps)), int64(maxGapShare*float64(capacity)))
}
