package torchsnap

import (
	"os"
	"testing"

	"github.com/vramscope/vramscope/profiler"
)

// BenchmarkReadLarge decodes VRAMSCOPE_BENCH_SNAPSHOT (make bench sets it).
func BenchmarkReadLarge(b *testing.B) {
	path := os.Getenv("VRAMSCOPE_BENCH_SNAPSHOT")
	if path == "" {
		b.Skip("VRAMSCOPE_BENCH_SNAPSHOT not set")
	}
	for i := 0; i < b.N; i++ {
		if _, err := ReadFile(path, profiler.NewFrames(), func(int, *profiler.Event) error { return nil }, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
