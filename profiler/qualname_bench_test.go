package profiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Labelling a 100k-node flame graph asks for every node's class: a lookup
// must cost about a map access, whatever the size of the file.
func BenchmarkQualnamesOf(b *testing.B) {
	var src strings.Builder
	for c := 0; c < 200; c++ {
		fmt.Fprintf(&src, "class C%d:\n", c)
		for m := 0; m < 20; m++ {
			fmt.Fprintf(&src, "    def m%d(self):\n        return %d\n\n", m, m)
		}
	}
	path := filepath.Join(b.TempDir(), "big.py")
	if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var q Qualnames
	if got := q.Of(path, 1+61*7+1+3*5+1, "m5"); got != "C7.m5" {
		b.Fatalf("got %q", got)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Of(path, 1+(i%4000)*3, "m5")
	}
}
