package lsp

import (
	"fmt"
	"path/filepath"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// hintLabel is the text at the end of a line: "1.53 GiB at peak · 26% · 12 allocs".
func hintLabel(s analyze.Site, weight string) string {
	if weight == "alloc" {
		return fmt.Sprintf("%s allocated · %d allocs", profiler.FormatBytes(s.AllocBytes), s.Allocs)
	}
	return fmt.Sprintf("%s at peak · %.0f%% · %s", profiler.FormatBytes(s.PeakBytes), 100*s.PeakShare, plural(s.PeakAllocs, "alloc"))
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// place is a short file:line for lists.
func place(f profiler.Frame) string {
	if f.File == "" {
		return f.Func
	}
	return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
}
