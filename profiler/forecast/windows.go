package forecast

// windowMaxima splits levels into consecutive windows of size steps (the
// oldest levels that do not fill a window are left out, so the last window
// ends at the last level) and returns each window's centre step and
// maximum peak.
func windowMaxima(levels []Level, size int) []point {
	var pts []point
	for end := len(levels); end-size >= 0; end -= size {
		w := levels[end-size : end]
		var top int64
		for _, l := range w {
			top = max(top, l.peak())
		}
		centre := float64(w[0].Step+w[len(w)-1].Step) / 2
		pts = append(pts, point{x: centre, y: float64(top)})
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
