package analyze_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// expectedFile labels every real recording of the repository and the shared
// fixtures (see its "about").
var expectedFile = filepath.Join(exampleDir, "expected_findings.json")

type expectation struct {
	Name        string            `json:"name"`
	File        string            `json:"file"`
	Kinds       []string          `json:"kinds"`
	Iterations  *int              `json:"iterations"`
	Lines       map[string]string `json:"lines"`
	KnownMisses []string          `json:"known_misses"`
	Pending     bool              `json:"pending"`
	Note        string            `json:"note"`
}

func expectations(t *testing.T) []expectation {
	t.Helper()
	b, err := os.ReadFile(expectedFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Recordings []expectation `json:"recordings"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", expectedFile, err)
	}
	return doc.Recordings
}

// recordingPath resolves an expectation's file: "shared:" is ../shared/, a
// name without an extension is NAME.pickle or NAME.vsm (the agent's cases).
// A pending recording is first looked for in $VRAMSCOPE_RECORDINGS (the
// folder record_piles.py wrote, before its files are copied here). It
// returns "" when the file is not there.
func recordingPath(e expectation) string {
	p := filepath.Join("..", "..", e.File)
	if rest, ok := strings.CutPrefix(e.File, "shared:"); ok {
		p = filepath.Join("..", "..", "..", "shared", rest)
	}
	cands := []string{p}
	if dir := os.Getenv("VRAMSCOPE_RECORDINGS"); dir != "" && e.Pending {
		p = filepath.Join(dir, filepath.Base(e.File))
		cands = []string{p}
	}
	if filepath.Ext(p) == "" {
		cands = []string{p + ".pickle", p + ".vsm"}
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return ""
}

var (
	labelledMu  sync.Mutex
	labelledRes = map[string]*analyze.Result{}
)

// analyseLabelled analyses one labelled recording once per test binary; a
// compressed one (the shared large fixtures) is decompressed with xz first.
// nil, with the reason, when it cannot be read here.
func analyseLabelled(t *testing.T, e expectation) (*analyze.Result, string) {
	t.Helper()
	labelledMu.Lock()
	defer labelledMu.Unlock()
	if r := labelledRes[e.Name]; r != nil {
		return r, ""
	}
	path := recordingPath(e)
	if path == "" {
		return nil, "not recorded yet"
	}
	if strings.HasSuffix(path, ".xz") {
		xz, err := exec.LookPath("xz")
		if err != nil {
			return nil, "no xz to decompress it"
		}
		out := filepath.Join(t.TempDir(), e.Name+".pickle")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(xz, "-dc", path)
		cmd.Stdout = f
		err = cmd.Run()
		f.Close()
		if err != nil {
			t.Fatalf("xz -dc %s: %v", path, err)
		}
		path = out
	}
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	labelledRes[e.Name] = r
	return r, ""
}

func kindSet(kinds []string) map[string]bool {
	m := map[string]bool{}
	for _, k := range kinds {
		m[k] = true
	}
	return m
}

// Every labelled recording that is here gets exactly its labelled kinds
// (less the acknowledged misses), each labelled line, and its known iteration
// count within one (an edge iteration may be cut by the trace's start).
func TestExpectedFindings(t *testing.T) {
	for _, e := range expectations(t) {
		t.Run(e.Name, func(t *testing.T) {
			r, why := analyseLabelled(t, e)
			if r == nil {
				if !e.Pending && !strings.HasPrefix(e.File, "shared:") {
					t.Errorf("%s: %s, and it is not marked pending", e.File, why)
				}
				t.Skipf("%s: %s", e.File, why)
			}
			want := kindSet(e.Kinds)
			for _, k := range e.KnownMisses {
				delete(want, k)
			}
			got := kindSet(kinds(r))
			for k := range want {
				if !got[k] {
					t.Errorf("no %s finding (%s); found %v", k, e.Note, kinds(r))
				}
			}
			for k := range got {
				if !want[k] {
					t.Errorf("unexpected %s finding (%s): %v", k, e.Note, titles(r, k))
				}
			}
			for k, place := range e.Lines {
				if !findingAt(r, k, place) {
					t.Errorf("no %s finding at %s: %v", k, place, titles(r, k))
				}
			}
			if e.Iterations != nil && !r.Devices[0].StepsIncomplete {
				// Steps annotated before the trace began count: the run made them.
				if d := len(r.Steps) + r.StepsBeforeTrace - *e.Iterations; d < -1 || d > 1 {
					t.Errorf("%d steps (%s; %d before the trace), the run made %d", len(r.Steps), r.StepSource,
						r.StepsBeforeTrace, *e.Iterations)
				}
			}
		})
	}
}

func findingAt(r *analyze.Result, kind, place string) bool {
	for _, f := range findingsOf(r, kind) {
		if fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line) == place {
			return true
		}
	}
	return false
}

func titles(r *analyze.Result, kind string) []string {
	var out []string
	for _, f := range findingsOf(r, kind) {
		out = append(out, f.Title)
	}
	return out
}

// The lines labelled in record_piles.py's cases are the lines its comments
// mark "expect: KIND", so the labels follow the script when it is edited.
func TestExpectedLinesMarked(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "examples", "record", "record_piles.py"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(script), "\n")
	marked := 0
	for i, l := range lines {
		if strings.Contains(l, "# expect: ") {
			marked++
			found := false
			for _, e := range expectations(t) {
				for k, place := range e.Lines {
					found = found || (place == fmt.Sprintf("record_piles.py:%d", i+1) && strings.Contains(l, "# expect: "+k))
				}
			}
			if !found {
				t.Errorf("record_piles.py:%d is marked %q but no expectation names it", i+1, strings.TrimSpace(l))
			}
		}
	}
	for _, e := range expectations(t) {
		for k, place := range e.Lines {
			if base, n, ok := strings.Cut(place, ":"); ok && base == "record_piles.py" {
				var i int
				fmt.Sscan(n, &i)
				if i < 1 || i > len(lines) || !strings.Contains(lines[i-1], "# expect: "+k) {
					t.Errorf("%s: %s at %s, but that line is not marked \"expect: %s\"", e.Name, k, place, k)
				}
			}
		}
	}
	if marked == 0 {
		t.Error("record_piles.py marks no line")
	}
}

// confusionKinds are the kinds the table counts: every kind the analysis
// reports (non_pytorch_memory needs the daemon's NVML view, which only the
// agent's recordings carry; daemon/nonpytorch_test.go covers it).
var confusionKinds = []string{analyze.KindOOM, analyze.KindFragmentation, analyze.KindLargeAllocation, analyze.KindActivationPeak,
	analyze.KindLeak, analyze.KindCacheGrowth, analyze.KindUnboundedCache, analyze.KindLoopAccumulation, analyze.KindOptimizerState}

const (
	confusionBegin = "<!-- confusion table: generated by go test ./profiler/analyze -run TestConfusionTable -update; do not edit -->"
	confusionEnd   = "<!-- end of confusion table -->"
)

// confusionTable counts, per kind, the labelled recordings where a finding
// of that kind was found and labelled (TP), found but not labelled (FP),
// labelled but not found (FN), neither (TN).
func confusionTable(t *testing.T, es []expectation) (string, bool) {
	type cell struct {
		tp, fp, fn, tn int
		wrong          []string
	}
	cells := map[string]*cell{}
	for _, k := range confusionKinds {
		cells[k] = &cell{}
	}
	var here, pending []string
	counts := map[string][2]int{} // step source -> labelled iteration counts found exactly, all
	complete := true
	for _, e := range es {
		r, why := analyseLabelled(t, e)
		if r == nil {
			if e.Pending {
				pending = append(pending, e.Name)
			} else {
				t.Logf("%s: %s", e.Name, why)
				complete = false
			}
			continue
		}
		here = append(here, e.Name)
		if e.Iterations != nil {
			c := counts[r.StepSource]
			if len(r.Steps)+r.StepsBeforeTrace == *e.Iterations {
				c[0]++
			}
			c[1]++
			counts[r.StepSource] = c
		}
		want, got := kindSet(e.Kinds), kindSet(kinds(r))
		for _, k := range confusionKinds {
			c := cells[k]
			switch {
			case want[k] && got[k]:
				c.tp++
			case got[k]:
				c.fp++
				c.wrong = append(c.wrong, "FP "+e.Name)
			case want[k]:
				c.fn++
				c.wrong = append(c.wrong, "FN "+e.Name)
			default:
				c.tn++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", confusionBegin)
	fmt.Fprintf(&b, "Over the %d labelled recordings here (examples/snapshots/expected_findings.json; the shared fixtures included):\n\n", len(here))
	b.WriteString("| kind | true pos. | false pos. | false neg. | true neg. | wrong on |\n|---|---|---|---|---|---|\n")
	for _, k := range confusionKinds {
		c := cells[k]
		wrong := strings.Join(c.wrong, ", ")
		if wrong == "" {
			wrong = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %s |\n", k, c.tp, c.fp, c.fn, c.tn, wrong)
	}
	a, p := counts[analyze.StepsFromAnnotations], counts[analyze.StepsFromPeriodicity]
	fmt.Fprintf(&b, "\nKnown iteration counts found exactly: %d of %d with steps from annotations, %d of %d from periodicity.\n",
		a[0], a[1], p[0], p[1])
	if len(pending) > 0 {
		fmt.Fprintf(&b, "\nNot recorded yet (examples/record/record_piles.py, on a GPU), so not counted: %s.\n", strings.Join(pending, ", "))
	}
	fmt.Fprintf(&b, "\n%s", confusionEnd)
	return b.String(), complete
}

// The confusion table in docs/engine-notes.md#findings is this test's
// output over every labelled recording that is here; -update rewrites it.
func TestConfusionTable(t *testing.T) {
	table, complete := confusionTable(t, expectations(t))
	if !complete {
		reftool.Missing(t, "some labelled recordings cannot be read here (the shared fixtures, or xz for the large ones): the table would be partial")
	}
	doc := filepath.Join("..", "..", "docs", "engine-notes.md")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, confusionBegin), strings.Index(s, confusionEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no confusion table markers", doc)
	}
	cur := s[i : j+len(confusionEnd)]
	if cur == table {
		return
	}
	if *golden.Update {
		if err := os.WriteFile(doc, []byte(s[:i]+table+s[j+len(confusionEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the confusion table in %s is out of date (go test ./profiler/analyze -run TestConfusionTable -update):\n%s", doc, table)
}
