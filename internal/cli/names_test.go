package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamesFlag: --names gives recorded files the names texts use for them
// (the notebook names its cells' files "cell [3]"): finding titles and fixes
// and phase names ("[backward pass of cell [3]:171]" in the flame graph) say
// them, while files and lines stay the recorded ones. A bad names
// file is an input error naming it.
func TestNamesFlag(t *testing.T) {
	snap := "../../examples/snapshots/findings/cache_growth.pickle"
	recorded := "/work/main/examples/record/record_findings.py" // where the recording ran
	names := filepath.Join(t.TempDir(), "names.json")
	os.WriteFile(names, []byte(`{"`+recorded+`": "cell [3]"}`), 0o644)

	plain := mustRun(t, "analyze", "--json", snap).stdout
	named := mustRun(t, "analyze", "--json", "--names", names, snap).stdout
	if !strings.Contains(plain, "record_findings.py:168 kept") {
		t.Fatalf("the recording no longer has its cache finding at record_findings.py:168")
	}
	var r struct {
		Findings []struct{ Title, Fix, File string } `json:"findings"`
		Sites    []struct{ File, Function string }   `json:"sites"`
	}
	if err := json.Unmarshal([]byte(named), &r); err != nil {
		t.Fatal(err)
	}
	titled := false
	for _, f := range r.Findings {
		if strings.Contains(f.Title+f.Fix, "record_findings.py:") {
			t.Errorf("finding still names the file: %q / %q", f.Title, f.Fix)
		}
		titled = titled || strings.Contains(f.Title, "cell [3]:168 kept")
	}
	if !titled {
		t.Error("the cache finding's title does not use the name")
	}
	for _, s := range r.Sites {
		if s.File != "" && s.File != recorded && strings.HasSuffix(s.File, "record_findings.py") {
			t.Errorf("a site's file changed: %s", s.File)
		}
	}
	// Backward passes are phase frames of the flame graph.
	if !strings.Contains(mustRun(t, "flame", "--format", "json", snap).stdout, "[backward pass of record_findings.py:") {
		t.Fatal("the recording no longer has a backward pass frame")
	}
	tree := mustRun(t, "flame", "--format", "json", "--names", names, snap).stdout
	if !strings.Contains(tree, "[backward pass of cell [3]:") || strings.Contains(tree, "[backward pass of record_findings.py:") {
		t.Error("the flame graph's phase frames do not use the name")
	}

	os.WriteFile(names, []byte(`["not", "an object"]`), 0o644)
	o := run("analyze", "--names", names, snap)
	if o.code == 0 || !strings.Contains(o.stderr, names) {
		t.Errorf("a bad names file: %v", o)
	}
}
