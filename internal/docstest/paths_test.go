package docstest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// topDirs are the repository's top-level folders: a word that starts with one
// of them and a slash is a repository path ("profiler/flame/web/flame.js").
var topDirs = []string{"bench", "cmd", "daemon", "deploy", "docs", "examples", "internal", "jupyter", "lsp", "profiler", "vscode-ext"}

// repoPath finds repository paths in text; the lookbehind-free guard (a
// preceding character) is checked by hand.
var repoPath = regexp.MustCompile(`(?:` + strings.Join(topDirs, "|") + `)/[\w.\-/*{}]*`)

// sourceName finds source file names, with or without folders ("state.go",
// "test/e2e.test.mjs").
var sourceName = regexp.MustCompile(`[\w\-/]+(?:\.[\w\-]+)*\.(?:go|mjs|ts)\b`)

// backticked finds Markdown code spans.
var backticked = regexp.MustCompile("`[^`\n]+`")

// tree is every file and folder of the repository (tracked, or new and not
// ignored), as paths relative to the root.
type tree struct {
	paths map[string]bool
	files []string
}

func loadTree(t *testing.T) *tree {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	tr := &tree{paths: map[string]bool{}}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			continue // deleted in the work tree, not yet committed
		}
		tr.files = append(tr.files, f)
		for p := f; p != "." && p != "/"; p = path.Dir(p) {
			tr.paths[p] = true
		}
	}
	return tr
}

// notYetWritten are files a make target writes that no one has run yet; each
// says which. Remove an entry once its file is committed.
var notYetWritten = map[string]string{
	"docs/page-bench.md": "make bench-page (bench/page.mjs)",
}

// has says whether p (a path, perhaps a glob, a Go package pattern or a Go
// name such as daemon/counters.DeviceSample) names something in the tree, or
// a build output git ignores (bin/, the .vsix).
func (tr *tree) has(p string) bool {
	p = strings.TrimSuffix(strings.TrimSuffix(p, "/..."), "/")
	if _, ok := notYetWritten[p]; ok {
		return true
	}
	if strings.ContainsAny(p, "{}") {
		return true // a brace list ("web/{a,b}.js"): not worth expanding
	}
	if dir, name, ok := cutLast(p, "."); ok && tr.paths[dir] && name != "" && name[0] >= 'A' && name[0] <= 'Z' {
		return true // a Go name in a package
	}
	// A build output; a folder pattern ("/vscode-ext/bin/") matches a path
	// that does not exist yet only with its trailing slash.
	for _, q := range []string{p, p + "/"} {
		if exec.Command("git", "-C", root, "check-ignore", "-q", q).Run() == nil {
			return true
		}
	}
	if strings.ContainsAny(p, "*?[") {
		for f := range tr.paths {
			if ok, _ := path.Match(p, f); ok {
				return true
			}
		}
		return false
	}
	return tr.paths[p]
}

// hasFile says whether a file name (perhaps with some of its folders) ends
// the path of a file in the tree.
func (tr *tree) hasFile(name string) bool {
	for _, f := range tr.files {
		if f == name || strings.HasSuffix(f, "/"+name) {
			return true
		}
	}
	return false
}

// missingPaths lists the repository paths in text that the tree lacks.
func (tr *tree) missingPaths(text string) []string {
	var out []string
	for _, loc := range repoPath.FindAllStringIndex(text, -1) {
		if loc[0] > 0 && strings.ContainsAny(text[loc[0]-1:loc[0]], "/.-_~$:@") || loc[0] > 0 && isWord(text[loc[0]-1]) {
			continue // part of a longer path (/work/main/examples/…, ../shared/…) or word
		}
		p := strings.TrimRight(text[loc[0]:loc[1]], ".,:;")
		if !tr.has(p) {
			out = append(out, p)
		}
	}
	return out
}

// missingSources lists the source file names in text that no file ends with.
func (tr *tree) missingSources(text string) []string {
	var out []string
	for _, loc := range sourceName.FindAllStringIndex(text, -1) {
		if loc[0] > 0 && strings.ContainsAny(text[loc[0]-1:loc[0]], ".~$@") {
			continue
		}
		if name := strings.TrimPrefix(text[loc[0]:loc[1]], "/"); !tr.hasFile(name) {
			out = append(out, name)
		}
	}
	return out
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func isWord(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// TestDocsNameRealPaths: every repository path in a code span, a link or a
// code block of README.md and docs/*.md exists, and so does every source file
// a code span names.
func TestDocsNameRealPaths(t *testing.T) {
	tr := loadTree(t)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, doc := range docs {
		rel, _ := filepath.Rel(root, doc)
		eachLine(t, doc, func(n int, line string, code bool) {
			var spans []string
			if code {
				spans = []string{line}
			} else {
				spans = backticked.FindAllString(line, -1)
				spans = append(spans, linkTargets(line)...)
			}
			for _, s := range spans {
				for _, p := range tr.missingPaths(s) {
					t.Errorf("%s:%d names %s, which does not exist", rel, n, p)
				}
				if !code && strings.HasPrefix(s, "`") {
					for _, f := range tr.missingSources(s) {
						t.Errorf("%s:%d names %s; no file of that name exists", rel, n, f)
					}
				}
			}
		})
	}
}

// TestCommentsNameRealPaths: every repository path and Go, TypeScript or
// JavaScript module file a comment names exists (Go, Python, TypeScript and
// JavaScript sources, and the Makefile).
func TestCommentsNameRealPaths(t *testing.T) {
	tr := loadTree(t)
	for _, f := range tr.files {
		marker := commentMarker(f)
		if marker == "" || strings.Contains(f, "testdata/") || strings.Contains(f, "node_modules/") {
			continue
		}
		eachLine(t, filepath.Join(root, f), func(n int, line string, _ bool) {
			i := strings.Index(line, marker)
			if i < 0 {
				return
			}
			c := line[i:]
			for _, p := range append(tr.missingPaths(c), tr.missingSources(c)...) {
				t.Errorf("%s:%d: a comment names %s, which does not exist", f, n, p)
			}
		})
	}
}

func commentMarker(f string) string {
	switch path.Ext(f) {
	case ".go", ".ts", ".mjs":
		return "//"
	case ".py":
		return "#"
	}
	if f == "Makefile" {
		return "#"
	}
	return ""
}

// linkTargets returns the targets of Markdown links on a line.
func linkTargets(line string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	return out
}

// eachLine calls fn with each line of a file, and whether it is inside a
// fenced code block.
func eachLine(t *testing.T, file string, fn func(n int, line string, code bool)) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	code := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			code = !code
			continue
		}
		fn(n, line, code)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", file, err))
	}
}

// TestCheckerCanFail feeds the checks names that do not exist.
func TestCheckerCanFail(t *testing.T) {
	tr := loadTree(t)
	if got := tr.missingPaths("see `profiler/analyze/no_such_file.go` and daemon/api/api.go"); len(got) != 1 || got[0] != "profiler/analyze/no_such_file.go" {
		t.Errorf("missingPaths = %v", got)
	}
	if got := tr.missingSources("`text_sync.go`, `state.go`, `test/no_such.test.mjs`"); len(got) != 2 {
		t.Errorf("missingSources = %v", got)
	}
	if got := splitTables([]string{"| a | b |", "|---|---|", "| 1 | 2 |", "", "| 3 | 4 |", "", "| c |", "|---|"}); len(got) != 1 || got[0] != "| 3 | 4 |" {
		t.Errorf("splitTables = %q", got)
	}
	if got := tr.missingPaths("/work/main/examples/none.py, ../shared/x/y, lsp/..., profiler/flame/web/*.js"); len(got) != 0 {
		t.Errorf("missingPaths flagged %v", got)
	}
}

// TestTablesAreWhole: no Markdown table in the docs is split by a blank line
// (the rows after it render as a paragraph of pipes): a row that follows a
// table's row and a blank line must start a new table (a separator next).
func TestTablesAreWhole(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, doc := range docs {
		rel, _ := filepath.Rel(root, doc)
		var lines []string
		eachLine(t, doc, func(_ int, line string, code bool) {
			if code {
				line = "" // fences and code are neither rows nor text here
			}
			lines = append(lines, line)
		})
		for _, n := range splitTables(lines) {
			t.Errorf("%s: a blank line splits a table before the row %q", rel, n)
		}
	}
}

// splitTables returns the rows that continue a table after a blank line.
func splitTables(lines []string) []string {
	row := func(i int) bool { return i >= 0 && i < len(lines) && strings.HasPrefix(lines[i], "|") }
	var out []string
	for i := 2; i < len(lines); i++ {
		if row(i) && strings.TrimSpace(lines[i-1]) == "" && row(i-2) && !(i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|-")) {
			out = append(out, lines[i])
		}
	}
	return out
}
