package analyze_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/flame"
)

var trainerDir = filepath.Join("..", "..", "..", "shared", "fixtures", "trainer")

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// With the container path mapped to the local trainer folder, every user line
// the result reports is a file that exists here, and the attribution (decided
// on the recorded names) is unchanged.
func TestPathMapping(t *testing.T) {
	need(t, trainerDir)
	local, err := filepath.Abs(trainerDir)
	if err != nil {
		t.Fatal(err)
	}
	byRule := &profiler.PathMap{}
	if err := byRule.AddRule("/workspace/trainer=" + local); err != nil {
		t.Fatal(err)
	}
	bySuffix := &profiler.PathMap{}
	if err := bySuffix.AddRoot(filepath.Dir(local)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		how string
		pm  *profiler.PathMap
	}{{"rule", byRule}, {"root", bySuffix}} {
		for _, name := range []string{"gpt2_train", "oom_batch"} {
			t.Run(c.how+"/"+name, func(t *testing.T) {
				path := pathOf(t, name)
				need(t, path)
				r, err := analyze.Run(path, analyze.Options{Paths: c.pm})
				if err != nil {
					t.Fatal(err)
				}
				plain := result(t, name)
				if len(r.Sites) != len(plain.Sites) {
					t.Fatalf("%d sites mapped, %d unmapped", len(r.Sites), len(plain.Sites))
				}
				for i, s := range r.Sites {
					p := plain.Sites[i]
					if s.Kind != p.Kind || s.PeakBytes != p.PeakBytes || s.Line != p.Line || s.Function != p.Function {
						t.Errorf("mapping changed site %d: %+v vs %+v", i, s, p)
					}
					if s.Kind == "user" {
						if !exists(s.File) {
							t.Errorf("user site %s:%d: no such local file", s.File, s.Line)
						}
						if filepath.Dir(s.File) != local {
							t.Errorf("user site %s not under %s", s.File, local)
						}
					}
				}
				for _, st := range r.Stacks {
					for _, f := range st.Frames {
						if profiler.IsUserFile(f.File) && !exists(f.File) {
							t.Errorf("top stack frame %s:%d: no such local file", f.File, f.Line)
						}
					}
				}
				for _, o := range r.OOMs {
					if !exists(o.File) {
						t.Errorf("OOM at %s: no such local file", o.File)
					}
				}
				for _, fd := range r.Findings {
					if fd.File != "" && !exists(fd.File) {
						t.Errorf("finding at %s: no such local file", fd.File)
					}
				}
				// The flame graph and exported origins use the local names too.
				tr := r.Flame(analyze.FlameOptions{Weight: flame.WeightPeak})
				tr.Walk(func(_ []*flame.Node, n *flame.Node) {
					if filepath.Base(n.File) == "train_gpt2.py" && !exists(n.File) {
						t.Errorf("flame node %s:%d: no such local file", n.File, n.Line)
					}
				})
				for _, o := range r.Origins() {
					for _, f := range o.Frames {
						if filepath.Base(f.File) == "train_gpt2.py" && !exists(f.File) {
							t.Errorf("origin frame %s: no such local file", f.File)
						}
					}
				}
			})
		}
	}
}
