package daemon

import (
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

// TestDeepStackFlame imports a 600,000-frame stack and asks for its flame
// tree: writing the tree's JSON overflowed the daemon's goroutine stack (a
// fatal error no recover catches), on import's first view and on every view
// after a restart. The tree is bounded and names the frames it left out.
func TestDeepStackFlame(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	var r api.SnapshotResult
	call(t, c, api.SnapshotImport, api.ImportParams{Path: hostile.WriteDeepStack(t, 600_000)}, &r)
	for _, w := range []flame.Weight{flame.WeightPeak, flame.WeightAlloc, flame.WeightCurrent} {
		var tr flame.Tree
		call(t, c, api.AnalysisFlame, api.FlameParams{ID: r.ID, Weight: string(w)}, &tr)
		depth, elided := 0, 0
		tr.Walk(func(p []*flame.Node, n *flame.Node) {
			depth = max(depth, len(p))
			if n.Name == profiler.ElidedFrame(600_000-profiler.MaxStackDepth+1).Func {
				elided++
			}
		})
		if w != flame.WeightCurrent && (depth != profiler.MaxStackDepth || elided != 1) {
			t.Errorf("%s: depth %d, %d elided frames; want %d and 1", w, depth, elided, profiler.MaxStackDepth)
		}
	}
	var sum analyze.Result
	call(t, c, api.AnalysisSummary, api.IDParams{ID: r.ID}, &sum)
	if sum.Peak.Bytes != 512 {
		t.Errorf("peak %d, want 512", sum.Peak.Bytes)
	}
}
