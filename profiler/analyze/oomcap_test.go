package analyze_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oom_batch ran out under a 6 GiB per-process cap on a 140 GiB device (its
// sidecar holds the cap the OOM observer reported): the OOM says a cap
// refused it, with a bound the real cap lies within, and the finding's title
// says so beside device_free.
func TestOOMUnderProcessCap(t *testing.T) {
	r := result(t, "oom_batch")
	b, err := os.ReadFile(filepath.Join(fixtureDir, "oom_batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var side struct {
		Limit int64 `json:"limit_bytes"`
	}
	if err := json.Unmarshal(b, &side); err != nil || side.Limit == 0 {
		t.Fatalf("oom_batch.json: limit %d, %v", side.Limit, err)
	}
	o := r.OOMs[0]
	if o.CapAtMost == 0 || side.Limit < o.Reserved || side.Limit > o.CapAtMost {
		t.Errorf("cap at most %d, reserved %d; the real cap %d", o.CapAtMost, o.Reserved, side.Limit)
	}
	var title string
	for _, f := range r.Findings {
		if f.Kind == "oom" {
			title = f.Title
		}
	}
	if !strings.Contains(title, "per-process cap of at most") {
		t.Errorf("oom finding: %q", title)
	}
}
