package lsp

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trainerLines is the real training script the fixtures' snapshots recorded.
func trainerLines(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "trainer/train_gpt2.py"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// edit is one scripted change: buffer lines [start, end) become repl.
type edit struct {
	start, end int
	repl       []string
}

// diffEdit is the one edit that turns a into b (their common start and end
// kept): what an editor sends for an undo, or a full-sync client for any change.
func diffEdit(a, b []string) edit {
	p, s := commonEnds(a, b)
	return edit{p, len(a) - s, append([]string(nil), b[p:len(b)-s]...)}
}

func apply(lines []string, e edit) []string { return splice(lines, e.start, e.end, e.repl) }

// lineOf is the 1-based line holding text in lines (trimmed), or 0.
func lineOf(lines []string, text string) int {
	for i, l := range lines {
		if strings.TrimSpace(l) == text {
			return i + 1
		}
	}
	return 0
}

func findLine(t *testing.T, lines []string, text string) int {
	t.Helper()
	n := lineOf(lines, text)
	if n == 0 {
		t.Fatalf("no line %q", text)
	}
	return n
}

// The statements the fixtures' snapshots put memory on (train_gpt2.py).
const (
	forward = "out = model(input_ids=ids, labels=ids)"
	step    = "opt.step()"
	build   = "return GPT2LMHeadModel(cfg).cuda()"
)

// TestLineMapScripted walks the edits of a user reading hints, each step
// checked against where the statement is in the buffer.
func TestLineMapScripted(t *testing.T) {
	base := trainerLines(t)
	fwd, stp := findLine(t, base, forward), findLine(t, base, step)
	cur := append([]string(nil), base...)
	m := newLineMap(base, cur)
	do := func(e edit) {
		cur = apply(cur, e)
		m.replace(e.start, e.end, e.repl)
	}
	expect := func(what string, recorded int, text string, edited bool) {
		t.Helper()
		got, ed, ok := m.toCurrent(recorded)
		want := lineOf(cur, text)
		if !ok || got != want || ed != edited {
			t.Errorf("%s: recorded line %d -> %d (edited %v, ok %v), want %d (edited %v)", what, recorded, got, ed, ok, want, edited)
		}
		if back, _, ok := m.toRecorded(want); !ok || back != recorded {
			t.Errorf("%s: line %d -> recorded %d, want %d", what, want, back, recorded)
		}
	}
	expect("unchanged", fwd, forward, false)

	do(edit{0, 0, []string{"# a comment", "import sys"}}) // two lines at the top
	expect("two lines inserted at the top", fwd, forward, false)
	expect("two lines inserted at the top", stp, step, false)

	i := findLine(t, cur, "import time") - 1
	do(edit{i, i + 1, nil}) // a line deleted above
	expect("a line deleted above", fwd, forward, false)

	i = findLine(t, cur, forward) - 1
	edited := strings.Replace(cur[i], "labels=ids)", "labels=ids, use_cache=False)", 1)
	before := cur[i]
	do(edit{i, i + 1, []string{edited}}) // the line itself
	if got, ed, ok := m.toCurrent(fwd); !ok || !ed || got != i+1 {
		t.Errorf("edited line: %d edited %v ok %v, want %d edited", got, ed, ok, i+1)
	}
	do(edit{i, i + 1, []string{before}}) // undo
	expect("undo of the edit", fwd, forward, false)

	i = findLine(t, cur, step) - 1
	gone := cur[i]
	do(edit{i, i + 1, nil})
	if _, _, ok := m.toCurrent(stp); ok {
		t.Error("a deleted line still has a place")
	}
	expect("after deleting the line below", fwd, forward, false)
	do(edit{i, i, []string{gone}}) // undo of the deletion
	expect("undo of the deletion", stp, step, false)
}

// TestLineMapReorderFunctions moves train_step above build_model: its lines
// keep their recorded lines, and so do the lines it jumped over.
func TestLineMapReorderFunctions(t *testing.T) {
	base := trainerLines(t)
	from, to := findLine(t, base, "def train_step(model, opt, ids):")-1, findLine(t, base, "def main():")-1
	fn := append([]string(nil), base[from:to]...)
	m := newLineMap(base, base)
	cur := apply(base, edit{from, to, nil}) // cut
	m.replace(from, to, nil)
	at := findLine(t, cur, "def build_model(layers=6):") - 1
	cur = apply(cur, edit{at, at, fn}) // paste
	m.replace(at, at, fn)
	for _, text := range []string{forward, step, build, "def main():"} {
		r := findLine(t, base, text)
		if got, ed, ok := m.toCurrent(r); !ok || ed || got != lineOf(cur, text) {
			t.Errorf("%q: recorded %d -> %d (ok %v, edited %v), want %d", text, r, got, ok, ed, lineOf(cur, text))
		}
	}
	// A full-sync client sends the whole text: the same answer from a diff.
	full := newLineMap(base, cur)
	for _, text := range []string{forward, step, build} {
		r := findLine(t, base, text)
		if got, _, ok := full.toCurrent(r); !ok || got != lineOf(cur, text) {
			t.Errorf("full text %q: %d -> %d, want %d", text, r, got, lineOf(cur, text))
		}
	}
}

// TestLineMapRandomEdits runs seeded random sequences of inserts, deletions,
// moves, edits of a line and undos, as incremental edits and as full-text
// changes: every recorded line whose text is still in the buffer once maps
// to it, edited lines say so, and deleted lines map nowhere.
func TestLineMapRandomEdits(t *testing.T) {
	base := trainerLines(t)
	for seed := int64(1); seed <= 150; seed++ {
		r := rand.New(rand.NewSource(seed))
		cur := append([]string(nil), base...)
		inc, full := newLineMap(base, cur), newLineMap(base, cur)
		var history [][]string
		for n := 0; n < 12; n++ {
			history = append(history, cur)
			next := randomEdit(r, cur, history, n)
			e := diffEdit(cur, next)
			inc.replace(e.start, e.end, e.repl)
			full.replace(0, len(cur), next)
			cur = next
			for name, m := range map[string]*lineMap{"incremental": inc, "full": full} {
				if err := checkMap(base, cur, m); err != nil {
					t.Fatalf("seed %d, edit %d (%s): %v", seed, n, name, err)
				}
			}
		}
	}
}

func randomEdit(r *rand.Rand, cur []string, history [][]string, n int) []string {
	i := r.Intn(len(cur))
	j := min(len(cur), i+1+r.Intn(4))
	switch r.Intn(5) {
	case 0:
		return apply(cur, edit{i, i, []string{fmt.Sprintf("x%d = %d  # new", n, r.Int())}})
	case 1:
		return apply(cur, edit{i, j, nil})
	case 2: // move a block
		block := append([]string(nil), cur[i:j]...)
		rest := apply(cur, edit{i, j, nil})
		at := r.Intn(len(rest) + 1)
		return apply(rest, edit{at, at, block})
	case 3:
		if strings.TrimSpace(cur[i]) == "" {
			return cur
		}
		return apply(cur, edit{i, i + 1, []string{cur[i] + " # edited"}})
	}
	return history[r.Intn(len(history))] // undo back to an earlier state
}

// checkMap is the oracle: a recorded line whose text (or its edited form) is
// in the buffer exactly once must map there; one whose text is gone maps
// nowhere, or to an edited line like it.
func checkMap(base, cur []string, m *lineMap) error {
	count := map[string]int{}
	for _, l := range base {
		count[key(l)]++
	}
	for r, l := range base {
		k := key(l)
		if k == "" || count[k] != 1 || strings.Contains(k, "# edited") {
			continue
		}
		plain, edited := 0, 0
		for i, c := range cur {
			switch key(c) {
			case k:
				plain = i + 1
			case k + " # edited", k + " # edited # edited":
				edited = i + 1
			}
		}
		got, ed, ok := m.toCurrent(r + 1)
		switch {
		case plain == 0 && edited == 0 && ok && (!ed || !similar(l, cur[got-1])):
			// Gone, unless another edit made a line like it (import time -> import torch).
			return fmt.Errorf("recorded line %d %q is gone but maps to %d %q", r+1, k, got, cur[got-1])
		case plain != 0 && (!ok || got != plain || ed):
			return fmt.Errorf("recorded line %d %q: got %d (ok %v, edited %v), want %d", r+1, k, got, ok, ed, plain)
		case plain == 0 && edited != 0 && ok && (got != edited || !ed):
			return fmt.Errorf("recorded line %d %q, edited: got %d (edited %v), want %d", r+1, k, got, ed, edited)
		}
	}
	return nil
}

// BenchmarkLineMapKeystroke is the cost of one keystroke (one line edited)
// in a 10,000-line file (the trainer repeated), beside the reference of
// diffing the whole text again (what a full-sync map would do each time).
func BenchmarkLineMapKeystroke(b *testing.B) {
	one := trainerLines(b)
	var base []string
	for len(base) < 10_000 {
		base = append(base, one...)
	}
	b.Run("incremental", func(b *testing.B) {
		m := newLineMap(base, base)
		for i := 0; i < b.N; i++ {
			line := 5000 + i%100
			m.replace(line, line+1, []string{m.cur[line] + "x"})
		}
	})
	b.Run("whole-text-diff", func(b *testing.B) {
		cur := append([]string(nil), base...)
		for i := 0; i < b.N; i++ {
			cur[5000] += "x"
			newLineMap(base, cur)
		}
	})
}

// TestOpenedFolderSurvivesSettings: the folder of a file opened outside every
// workspace folder keeps mapping recorded paths after the settings change
// (Helix sends didChangeConfiguration right after didOpen; the rebuild used
// to drop that folder, and the hints and hovers with it).
func TestOpenedFolderSurvivesSettings(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "trainer", "train_gpt2.py")
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var p paths
	p.reset(nil, nil)
	p.addRoot(local)
	if got := p.local("/workspace/trainer/train_gpt2.py"); got != local {
		t.Fatalf("after didOpen: %s maps to %s", "/workspace/trainer/train_gpt2.py", got)
	}
	p.reset([]string{"/elsewhere=/tmp"}, nil) // the settings changed
	if got := p.local("/workspace/trainer/train_gpt2.py"); got != local {
		t.Errorf("after the settings changed: maps to %s, want %s", got, local)
	}
}

// TestSameFileThroughALink: a document opened through a symbolic link to the
// workspace is the file the path map names by its own path (the hints and
// hovers of a workspace opened through a link were empty).
func TestSameFileThroughALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "train.py")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var p paths
	if linked := filepath.Join(dir, "link", "train.py"); !p.same(real, linked) || !p.same(linked, real) {
		t.Errorf("%s and %s are one file", real, linked)
	}
	if p.same(real, filepath.Join(dir, "real", "other.py")) {
		t.Error("two files read as one")
	}
}
