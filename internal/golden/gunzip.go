package golden

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gunzip writes the gzipped test input gz, unpacked, into a temporary
// directory of t and returns its path (the H200 recordings are kept gzipped:
// examples/snapshots/inference).
func Gunzip(t testing.TB, gz string) string {
	t.Helper()
	in, err := os.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatalf("%s: %v", gz, err)
	}
	path := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(gz), ".gz"))
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatalf("%s: %v", gz, err)
	}
	return path
}
