package flame

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"

	"github.com/vramscope/vramscope/profiler"
)

const evilName = "</script><script>alert(1)</script>"

func smallTree() *Tree {
	mod := profiler.Frame{File: "train.py", Line: 10, Func: "<module>"}
	fwd := profiler.Frame{File: "model.py", Line: 42, Func: "forward"}
	lin := profiler.Frame{File: "/venv/lib/python3.11/site-packages/torch/nn/functional.py", Line: 120, Func: "linear"}
	evil := profiler.Frame{File: "evil.py", Line: 1, Func: evilName}
	t := NewTree("small <test> & \u2028 snapshot", WeightPeak)
	t.Add([]profiler.Frame{mod, fwd, lin}, 3<<20, 3)
	t.Add([]profiler.Frame{mod, fwd}, 1<<20, 1)
	t.Add([]profiler.Frame{mod, evil}, 512<<10, 2)
	t.Add([]profiler.Frame{{Func: "<unknown>"}}, 4096, 1)
	t.Finish()
	return t
}

func writePage(t *testing.T, tr *Tree) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, tr); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteHTMLIsSelfContained(t *testing.T) {
	page := writePage(t, smallTree())
	for _, want := range []string{
		"<!DOCTYPE html>",
		`<script type="application/json" id="vramscope-data">`,
		`"n":"forward"`, // the data
		`"f":"model.py","l":42`,
		"globalThis.VramscopeFlame", // the script
		"VramscopeFlame.render(",
		".vf-tooltip", // the stylesheet
		"total: 4.50 MiB",
		"weight: peak",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"http://", "https://", "//cdn", "src=", "<link", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("page refers to something outside itself: %q", bad)
		}
	}
}

func TestWriteHTMLEscapesFrameText(t *testing.T) {
	page := writePage(t, smallTree())
	if strings.Contains(page, evilName) {
		t.Fatal("a frame name closed the data script element")
	}
	if strings.Contains(page, "<test>") {
		t.Error("the title is not escaped")
	}
	// The only script closings are the page's own three elements.
	if n := strings.Count(strings.ToLower(page), "</script"); n != 3 {
		t.Errorf("%d script closings, want 3", n)
	}
	if strings.Contains(page, "<!--") {
		t.Error("page contains an HTML comment opener")
	}
	// The data element still holds the tree, name intact once decoded.
	m := regexp.MustCompile(`(?s)<script type="application/json" id="vramscope-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no data element")
	}
	if strings.ContainsAny(m[1], "<>\u2028\u2029") {
		t.Error("data holds characters that are unsafe in a script element")
	}
	var back Tree
	if err := json.Unmarshal([]byte(m[1]), &back); err != nil {
		t.Fatalf("data does not decode: %v", err)
	}
	found := false
	for _, c := range back.Root.Children[0].Children {
		found = found || c.Name == evilName
	}
	if !found || back.Root.Value != 3<<20+1<<20+512<<10+4096 {
		t.Errorf("decoded data lost the frame or the total: %+v", back.Root)
	}
}

// The CLI inlines the script and stylesheet into script and style elements:
// they must not be able to end those elements early.
func TestAssetsCanBeInlined(t *testing.T) {
	for name, s := range map[string]string{"flame.js": Script(), "flame.css": Stylesheet(),
		"timeline.js+report.js": ReportScript(), "timeline.css+report.css": ReportStylesheet()} {
		low := strings.ToLower(s)
		if s == "" || strings.Contains(low, "</script") || strings.Contains(low, "</style") || strings.Contains(low, "<!--") {
			t.Errorf("%s cannot be inlined", name)
		}
		if strings.Contains(low, "http://") || strings.Contains(low, "https://") {
			t.Errorf("%s refers to a URL", name)
		}
	}
}

func TestWriteHTMLRejectsEmptyTree(t *testing.T) {
	if err := WriteHTML(&bytes.Buffer{}, nil); err == nil {
		t.Error("nil tree accepted")
	}
	if err := WriteHTML(&bytes.Buffer{}, &Tree{}); err == nil {
		t.Error("tree without root accepted")
	}
}

func TestWriteHTMLGolden(t *testing.T) {
	page := writePage(t, smallTree())
	golden.Check(t, "small.html.golden", []byte(page))
}

// The report page escapes hostile report text as the tree's, and holds both.
func TestWriteReportEscapes(t *testing.T) {
	report := `{"findings":[{"title":"` + strings.ReplaceAll(evilName, `"`, `\"`) + `"}]}`
	var b strings.Builder
	if err := WriteReport(&b, smallTree(), []byte(report)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, evilName) {
		t.Fatal("a finding's title closed the report's script element")
	}
	if n := strings.Count(strings.ToLower(page), "</script"); n != 5 {
		t.Errorf("%d script closings, want 5", n)
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" id="vramscope-report">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no report element")
	}
	var back struct {
		Findings []struct{ Title string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(m[1]), &back); err != nil || len(back.Findings) != 1 || back.Findings[0].Title != evilName {
		t.Errorf("report data: %v %+v", err, back)
	}
	if err := WriteReport(&b, smallTree(), []byte("{")); err == nil {
		t.Error("WriteReport took a report that is not JSON")
	}
}
