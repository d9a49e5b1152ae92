package cli_test

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestAnalyzeBundle: analyze --bundle WEIGHT prints, from one read of the
// snapshot, exactly what analyze --json, flame --format json --weight WEIGHT
// and analyze --report print; an unknown weight is a usage error.
func TestAnalyzeBundle(t *testing.T) {
	for _, name := range []string{"example_train", "leak_steps"} {
		snap := example(t, name)
		for _, w := range []string{"peak", "alloc"} {
			var b map[string]any
			if err := json.Unmarshal([]byte(mustRun(t, "analyze", "--bundle", w, snap).stdout), &b); err != nil {
				t.Fatalf("%s: --bundle is not JSON: %v", name, err)
			}
			for key, args := range map[string][]string{
				"result": {"analyze", "--json", snap},
				"tree":   {"flame", "--format", "json", "--weight", w, snap},
				"report": {"analyze", "--report", snap},
			} {
				var want any
				if err := json.Unmarshal([]byte(mustRun(t, args...).stdout), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(b[key], want) {
					t.Errorf("%s --bundle %s: %s differs from %v", name, w, key, args[:len(args)-1])
				}
			}
		}
	}
	if o := run("analyze", "--bundle", "most", example(t, "example_train")); o.code == 0 {
		t.Errorf("--bundle most: %v", o)
	}
}
