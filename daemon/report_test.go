package daemon

import (
	"encoding/json"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// analysis.report answers the same data as the engine's Result.Report on
// the same file: the report the page, the webview and the widget draw.
func TestAnalysisReport(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	direct, err := analyze.Run(fixtures+"gpt2_train.pickle", analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := direct.Report()
	if err != nil {
		t.Fatal(err)
	}
	a := importFixture(t, c, "gpt2_train.pickle")
	var got json.RawMessage
	call(t, c, api.AnalysisReport, api.IDParams{ID: a.ID}, &got)
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(want, &w)
	for _, k := range []string{"moments", "device", "sites", "findings", "categories"} {
		gb, _ := json.Marshal(g[k])
		wb, _ := json.Marshal(w[k])
		if g[k] == nil || string(gb) != string(wb) {
			t.Errorf("analysis.report %q differs from the engine's (%d bytes, want %d)", k, len(gb), len(wb))
		}
	}
}
