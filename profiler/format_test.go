package profiler

import (
	"encoding/json"
	"os"
	"testing"
)

// formatVectors are the shared cases (flame/testdata/format_vectors.json) that
// the Go engine, web/view.js, the extension's format.ts and the notebook's
// _report.py all answer; see its "about".
type formatVectors struct {
	Bytes   [][2]any    `json:"bytes"`   // number, text
	Percent [][3]any    `json:"percent"` // part, whole, text (the views' and the notebook's)
	Counts  [][2]any    `json:"counts"`  // number, text
	Kinds   [][2]string `json:"kinds"`   // file, kind
}

func loadVectors(t *testing.T) formatVectors {
	t.Helper()
	f, err := os.Open("flame/testdata/format_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var v formatVectors
	d := json.NewDecoder(f)
	d.UseNumber() // 2^63-1 stays exact
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(v.Bytes) == 0 || len(v.Counts) == 0 || len(v.Kinds) == 0 {
		t.Fatal("format_vectors.json: a section is empty")
	}
	return v
}

func TestFormatVectors(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.Bytes {
		if n, want := vectorCase(t, c); FormatBytes(n) != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, FormatBytes(n), want)
		}
	}
	for _, c := range v.Counts {
		if n, want := vectorCase(t, c); FormatCount(n) != want {
			t.Errorf("FormatCount(%d) = %q, want %q", n, FormatCount(n), want)
		}
	}
}

// vectorCase reads a [number, text] case.
func vectorCase(t *testing.T, c [2]any) (int64, string) {
	t.Helper()
	num, ok := c[0].(json.Number)
	want, ok2 := c[1].(string)
	if !ok || !ok2 {
		t.Fatalf("format_vectors.json: case %v is not [number, text]", c)
	}
	n, err := num.Int64()
	if err != nil {
		t.Fatalf("format_vectors.json: case %v: %v", c, err)
	}
	return n, want
}

// The kind of every path in the vectors, and IsUserFile agreeing with it.
func TestKindVectors(t *testing.T) {
	for _, c := range loadVectors(t).Kinds {
		if got := KindOfFile(c[0]); string(got) != c[1] {
			t.Errorf("KindOfFile(%q) = %q, want %q", c[0], got, c[1])
		}
		if got := IsUserFile(c[0]); got != (c[1] == string(KindUser)) {
			t.Errorf("IsUserFile(%q) = %v, kind %q", c[0], got, c[1])
		}
	}
}
