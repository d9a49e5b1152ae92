package analyze_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// TestEveryEvidenceNumberHasAUnit: every number a finding gives as evidence,
// on every snapshot in the repository and the shared fixtures and on the
// synthetic OOMs in generation, has its unit in the engine's table, so the
// terminal, the report and the editor say "2.33 GiB" or "24" by one rule.
func TestEveryEvidenceNumberHasAUnit(t *testing.T) {
	var paths []string
	for _, dir := range []string{exampleDir, findingDir, filepath.Join(exampleDir, "oom"),
		filepath.Join(exampleDir, "whatif"), fixtureDir} {
		for _, ext := range []string{"*.pickle", "*.vsm"} {
			m, _ := filepath.Glob(filepath.Join(dir, ext))
			paths = append(paths, m...)
		}
	}
	if len(paths) < 30 {
		t.Fatalf("%d snapshots found", len(paths))
	}
	missing := map[string]string{}
	check := func(name string, r *analyze.Result) {
		for _, f := range r.Findings {
			for k := range f.Evidence.Numbers {
				if _, ok := analyze.EvidenceUnitOf(k); !ok {
					missing[k] = name + " " + f.Kind
				}
			}
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		r, err := analyze.Run(p, analyze.Options{})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		check(filepath.Base(p), r)
	}
	for _, kind := range []string{"kv_oom"} {
		r, _ := synth(t, kind)
		check(kind, r)
	}
	for _, file := range []string{"gen_oom.pickle", "gen_oom_traced.pickle"} {
		r, _ := inferenceRun(t, file)
		check(file, r)
	}
	var keys []string
	for k, where := range missing {
		keys = append(keys, k+" ("+where+")")
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		t.Errorf("evidence numbers without a unit in evidence_units.go:\n%s", strings.Join(keys, "\n"))
	}
}
