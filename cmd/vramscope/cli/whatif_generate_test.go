package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// whatif --generate: from one recorded generate() run, the peak of other
// batch x length sizes, whether each fits, and the largest batch that does.
func TestWhatIfGenerate(t *testing.T) {
	snap := example(t, filepath.Join("findings", "healthy_kv_generate"))
	o := mustRun(t, "whatif", "--json", "--generate", "16x32+64,64x32+64", "--recorded", "16x32+64",
		"--device-memory", "1GiB", "--overhead", "0", snap)
	var w struct {
		Model struct {
			Peak       int64 `json:"recorded_peak"`
			CacheToken int64 `json:"cache_bytes_per_token"`
		} `json:"model"`
		Predictions []struct {
			Peak         int64 `json:"peak_allocated"`
			Fits         *bool `json:"fits"`
			LargestBatch int64 `json:"largest_batch"`
		} `json:"predictions"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &w); err != nil {
		t.Fatal(err)
	}
	if len(w.Predictions) != 2 || w.Model.CacheToken != 16<<10 {
		t.Fatalf("%s", o.stdout)
	}
	p0, p1 := w.Predictions[0], w.Predictions[1]
	if p0.Peak > w.Model.Peak || p0.Peak < w.Model.Peak*99/100 || p1.Peak <= p0.Peak || p0.Fits == nil || !*p0.Fits ||
		p0.LargestBatch < 64 || p0.LargestBatch != p1.LargestBatch {
		t.Errorf("%+v", w)
	}
	text := mustRun(t, "whatif", "--generate", "64x32+64", "--recorded", "16x32+64", "--device-memory", "2GiB", snap)
	if !strings.Contains(text.stdout, "KV cache 16.00 KiB a token") || !strings.Contains(text.stdout, "largest batch at these lengths: ") {
		t.Errorf("text:\n%s", text.stdout)
	}
	for _, bad := range [][]string{
		{"whatif", "--generate", "16x32+64", snap},
		{"whatif", "--generate", "16x32", "--recorded", "16x32+64", snap},
		{"whatif", "--generate", "16x32+64", "--recorded", "16x32+64", snap, snap},
		{"whatif", "--generate", "16x32+64", "--recorded", "16x32+64", example(t, "example_train")},
	} {
		if o := run(bad...); o.code != 2 || o.stderr == "" {
			t.Errorf("%v: %v", bad, o)
		}
	}
}
