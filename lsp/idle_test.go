package lsp

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// TestIdleDiagnostics: the idle report of the slow data pipeline recorded on
// the H200 (docs/gpu/idle, examples/idle/slow_loader.py) becomes a warning
// on the transform's line, "GPU idle 49% here", with the lines the training
// thread was on as related information.
func TestIdleDiagnostics(t *testing.T) {
	b, err := os.ReadFile("../docs/gpu/idle/slow_loader.report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r api.IdleResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	s := New(Config{})
	s.idle = []api.IdleResult{r}
	byURI := map[string][]protocol.Diagnostic{}
	s.idleDiagnostics(byURI)
	diags := byURI[string(uri.File("/work/main/examples/idle/slow_loader.py"))]
	if len(diags) != 1 {
		t.Fatalf("diagnostics %+v, want one on slow_loader.py", byURI)
	}
	d := diags[0]
	if d.Range.Start.Line != 13 || d.Code != "gpu_idle" || d.Severity != protocol.DiagnosticSeverityWarning ||
		!strings.HasPrefix(d.Message, "GPU idle 49% here: waiting for the data loader (70% in all; pid 2094, 77% idle over the last 11 s)\nFix: ") {
		t.Errorf("diagnostic %+v", d)
	}
	if len(d.RelatedInformation) != 5 || d.RelatedInformation[1].Message != "GPU idle 12% here" || d.RelatedInformation[1].Location.Range.Start.Line != 23 {
		t.Errorf("related %+v", d.RelatedInformation)
	}

	// The hints, in the program as it ran (examples/idle/slow_loader.py).
	src, err := os.ReadFile("../examples/idle/slow_loader.py")
	if err != nil {
		t.Fatal(err)
	}
	doc := newDocument(uri.File("/work/main/examples/idle/slow_loader.py"), string(src))
	hints := s.idleHints(doc, protocol.Range{End: protocol.Position{Line: 1000}})
	var got []string
	for _, h := range hints {
		got = append(got, fmt.Sprintf("%d %s", h.Position.Line+1, h.Label))
	}
	want := "14 GPU idle 49% here|15 GPU idle 4% here|24 GPU idle 12% here|25 GPU idle 3% here|41 GPU idle 1% here|43 GPU idle 1% here|44 GPU idle 2% here|45 GPU idle 1% here|46 GPU idle 1% here"
	if strings.Join(got, "|") != want {
		t.Errorf("hints\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	if h := s.idleHints(doc, protocol.Range{Start: protocol.Position{Line: 20}, End: protocol.Position{Line: 30}}); len(h) != 2 {
		t.Errorf("hints in lines 21-31: %+v", h)
	}
}
