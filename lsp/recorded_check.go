package lsp

// recorded_check.go tells the user when a file's text, as the server first
// read it for a snapshot, is not the text the snapshot recorded. A snapshot
// holds no source, only file:line and the function of each frame; a file
// saved with edits between the capture and that first read shifts every hint.
// Each user site must sit on a line of code inside its function's def.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler/analyze"
)

var defLineRE = regexp.MustCompile(`^\s*(?:async\s+)?(?:def|class)\s+(\w+)`)

// misplaced lists the sites whose recorded line in src is not a line of code
// inside their function (blank, a comment, a def, past the end, or in another
// function), in line order.
func misplaced(src []string, sites map[int]analyze.Site) []analyze.Site {
	var bad []analyze.Site
	for line, site := range sites {
		if !fits(src, line, site.Function) {
			bad = append(bad, site)
		}
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].Line < bad[j].Line })
	return bad
}

func fits(src []string, line int, function string) bool {
	if line < 1 || line > len(src) {
		return false
	}
	text := strings.TrimSpace(src[line-1])
	if text == "" || strings.HasPrefix(text, "#") || defLineRE.MatchString(src[line-1]) {
		return false
	}
	if strings.HasPrefix(function, "<") && function != "<module>" {
		return true // a lambda or comprehension: its def is not a name to find
	}
	return enclosing(src, line) == function
}

// enclosing is the name of the innermost def or class around line, by
// indentation ("<module>" at the top level).
func enclosing(src []string, line int) string {
	indent := indentOf(src[line-1])
	for i := line - 2; i >= 0 && indent > 0; i-- {
		t := strings.TrimSpace(src[i])
		if t == "" || strings.HasPrefix(t, "#") || indentOf(src[i]) >= indent {
			continue
		}
		indent = indentOf(src[i])
		if m := defLineRE.FindStringSubmatch(src[i]); m != nil {
			return m[1]
		}
	}
	return "<module>"
}

func indentOf(s string) int { return len(s) - len(strings.TrimLeft(s, " \t")) }

// checkRecorded says once per snapshot and file when the file's text does
// not fit what the snapshot recorded.
func (s *Server) checkRecorded(l *loaded, path string, src []string) {
	l.srcMu.Lock()
	if l.checked == nil {
		l.checked = map[string]bool{}
	}
	done := l.checked[path]
	l.checked[path] = true
	l.srcMu.Unlock()
	if done {
		return
	}
	sites := s.paths.sitesIn(l, path)
	bad := misplaced(src, sites)
	if len(bad) == 0 {
		return
	}
	b := bad[0]
	s.showMessage(msgWarning, fmt.Sprintf("vramscope: %s differs from the source %s recorded: line %d is not a line of %s (%d of %d recorded lines do not fit); it was probably saved with edits after the snapshot was taken, and hints may sit on the wrong lines",
		path, filepath.Base(l.path), b.Line, b.Function, len(bad), len(sites)))
}
