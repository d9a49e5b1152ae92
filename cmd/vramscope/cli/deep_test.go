package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/vramscope/vramscope/internal/hostile"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

// TestDeepStack runs every front end of the CLI on a 600,000-frame stack:
// each used to die with "fatal error: stack overflow" (encoding/json recursed
// once per level of the flame tree). The stack keeps its outermost and
// innermost frames with one naming the rest.
func TestDeepStack(t *testing.T) {
	snap := hostile.WriteDeepStack(t, 600_000)
	dir := t.TempDir()
	elided := profiler.ElidedFrame(600_000 - profiler.MaxStackDepth + 1).Func
	for _, format := range []string{"html", "json", "collapsed", "pprof"} {
		out := filepath.Join(dir, "deep."+format)
		mustRun(t, "flame", snap, "--format", format, "-o", out)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		switch format {
		case "json":
			var tr flame.Tree
			if err := json.Unmarshal(b, &tr); err != nil {
				t.Fatal(err)
			}
			depth := 0
			tr.Walk(func(p []*flame.Node, _ *flame.Node) { depth = max(depth, len(p)) })
			if depth != profiler.MaxStackDepth {
				t.Errorf("json: tree depth %d, want %d", depth, profiler.MaxStackDepth)
			}
			fallthrough
		case "html", "collapsed":
			if !strings.Contains(string(b), elided) {
				t.Errorf("%s: no %q frame", format, elided)
			}
		case "pprof":
			p, err := profile.ParseData(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Sample) != 1 || len(p.Sample[0].Location) != profiler.MaxStackDepth {
				t.Errorf("pprof: %d samples, want one of %d locations", len(p.Sample), profiler.MaxStackDepth)
			}
		}
	}
	o := mustRun(t, "analyze", "--json", snap)
	if !json.Valid([]byte(o.stdout)) || !strings.Contains(o.stdout, elided) {
		t.Errorf("analyze --json: %s", truncate(o.stdout, 300))
	}
	mustRun(t, "analyze", "--html", filepath.Join(dir, "a.html"), snap)
}
