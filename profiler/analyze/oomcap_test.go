package analyze_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
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

// TestOOMUnderKnownCap: an agent that read the process's cap at the OOM
// (memory_caps in its walk's section: jupyter/vramscope/agent/_capture.py) gets the
// cap said exactly, not bounded. testdata/lora_gpt2_cap.pickle is the H200's
// examples/snapshots/oom/lora_gpt2.pickle with the section the agent now
// writes, [[0, 6 GiB]]: the cap that program set (examples/oom/common.py cap(6)).
func TestOOMUnderKnownCap(t *testing.T) {
	r, err := analyze.Run(filepath.Join("testdata", "lora_gpt2_cap.pickle"), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := r.OOMs[0]
	if o.Cap != 6<<30 || o.CapAtMost < o.Cap {
		t.Errorf("cap %d (at most %d), want 6 GiB", o.Cap, o.CapAtMost)
	}
	for _, f := range r.Findings {
		if f.Kind == "oom" && (!strings.Contains(f.Title, "a per-process cap of 6.00 GiB refused it") || f.Evidence.Numbers["process_cap"] != 6<<30) {
			t.Errorf("oom finding: %q %v", f.Title, f.Evidence.Numbers)
		}
	}
	plain, err := analyze.Run(filepath.Join("..", "..", "examples", "snapshots", "oom", "lora_gpt2.pickle"), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.OOMs[0].Cap != 0 || plain.OOMs[0].CapText() != "a per-process cap of at most "+profiler.FormatBytes(plain.OOMs[0].CapAtMost) {
		t.Errorf("without the agent's cap: %+v", plain.OOMs[0])
	}
}
