package analyze

import (
	"os"
	"testing"
)

func BenchmarkAnalyzeLarge(b *testing.B) {
	path := os.Getenv("VRAMSCOPE_BENCH_SNAPSHOT")
	if path == "" {
		b.Skip("VRAMSCOPE_BENCH_SNAPSHOT not set")
	}
	for i := 0; i < b.N; i++ {
		if _, err := Run(path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
