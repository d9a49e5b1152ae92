package forecast

// windowMaxima splits levels into consecutive windows of size steps (the
// oldest levels that do not fill a window are left out, so the last window
// ends at the last level) and returns each window's centre step and
// maximum peak.
func windowMaxima(levels []Level, size int) []point {
	var pts []point
	for end := len(levels); end-size >= 0; end -= size {
		w := levels[end-size : end]
		var top, res int64
		for _, l := range w {
			top, res = max(top, l.peak()), max(res, l.Reserved)
		}
		centre := float64(w[0].Step+w[len(w)-1].Step) / 2
		pts = append(pts, point{x: centre, y: float64(top), r: float64(res)})
	}
	for i, j := 0, len(pts)-1; i < j; i, j = i+1, j-1 {
		pts[i], pts[j] = pts[j], pts[i]
	}
	return pts
}

// windowSize is the levels per window for a span of n levels.
func (p Params) windowSize(n int) int {
	return max(p.MinWindowSteps, n/p.Windows)
}

// cacheGap is what the caching allocator holds beyond the step peak in the
// last windows: the median of reserved minus peak over pts' last third, at
// least 0. The allocator fails when reserved, not the peak, reaches the cap
// (the H200 leak in testdata/leak.json ran out with its peak 306 MiB under
// its 3 GiB cap and reserved at the cap), so the peak's trend is projected
// to the capacity less this gap.
func cacheGap(pts []point) int64 {
	last := thirds(pts)[2]
	gaps := make([]float64, len(last))
	for i, p := range last {
		gaps[i] = max(p.r-p.y, 0)
	}
	return int64(median(gaps))
}
