package lsp

import (
	"os"
	"strings"
	"unicode/utf16"

	"go.lsp.dev/protocol"
)

// document is an open text document: its file name, its lines, and for each
// snapshot shown over it, where that snapshot's recorded lines are now
// (the user edits while reading the hints).
type document struct {
	uri   protocol.DocumentURI
	path  string
	lines []string
	maps  map[*loaded]*lineMap
}

func newDocument(uri protocol.DocumentURI, text string) *document {
	return &document{uri: uri, path: filename(uri), lines: strings.Split(text, "\n"), maps: map[*loaded]*lineMap{}}
}

// filename is the local path of a file: URI ("" for other schemes).
func filename(uri protocol.DocumentURI) string {
	if !strings.HasPrefix(string(uri), "file://") {
		return ""
	}
	defer func() { recover() }() // uri.Filename panics on a malformed URI
	return uri.Filename()
}

// endOf is the position after the last character of line (1-based), in the
// UTF-16 units LSP counts in.
func (d *document) endOf(line int) (protocol.Position, bool) {
	if line < 1 || line > len(d.lines) {
		return protocol.Position{}, false
	}
	text := strings.TrimRight(d.lines[line-1], "\r")
	return protocol.Position{Line: uint32(line - 1), Character: uint32(len(utf16.Encode([]rune(text))))}, true
}

// change applies one content change: a range replaced (incremental sync), or
// the whole text when there is no range. The line maps follow it.
func (d *document) change(r *protocol.Range, text string) {
	start, end := 0, len(d.lines)
	repl := strings.Split(text, "\n")
	if r != nil {
		start, end = min(int(r.Start.Line), len(d.lines)-1), min(int(r.End.Line), len(d.lines)-1)
		end = max(start, end)
		sc := byteOffset(d.lines[start], r.Start.Character)
		ec := byteOffset(d.lines[end], r.End.Character)
		if int(r.Start.Line) > start { // past the last line: its end
			sc = len(d.lines[start])
		}
		if int(r.End.Line) > end {
			ec = len(d.lines[end])
		}
		repl = strings.Split(d.lines[start][:sc]+text+d.lines[end][ec:], "\n")
		end++
	}
	d.lines = splice(d.lines, start, end, repl)
	for _, m := range d.maps {
		m.replace(start, end, repl)
	}
}

// byteOffset is the byte offset in line of a position counted in UTF-16
// units (clamped to the line).
func byteOffset(line string, units uint32) int {
	n := uint32(0)
	for i, r := range line {
		if n >= units {
			return i
		}
		n += uint32(max(utf16.RuneLen(r), 1))
	}
	return len(line)
}

func (s *Server) document(uri protocol.DocumentURI) *document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[string(uri)]
}

// recordedSource is the text of a local file as snapshot l recorded it, as
// far as the server knows: the file as it was on disk when the server first
// read it for l (kept for the session, so saving edits later does not move
// the baseline). A snapshot holds no source text; a file changed on disk
// between the capture and that first read cannot be told apart.
func (l *loaded) recordedSource(path string, fallback []string) []string {
	l.srcMu.Lock()
	defer l.srcMu.Unlock()
	if src, ok := l.sources[path]; ok {
		return src
	}
	src := fallback
	if b, err := os.ReadFile(path); err == nil {
		src = strings.Split(string(b), "\n")
	}
	if l.sources == nil {
		l.sources = map[string][]string{}
	}
	l.sources[path] = src
	return src
}

// lineMap is where snapshot l's recorded lines of d are now; made on first
// use, by a line diff of the recorded source against the buffer.
func (s *Server) lineMap(d *document, l *loaded) *lineMap {
	s.mu.Lock()
	m, ok := d.maps[l]
	lines := d.lines
	s.mu.Unlock()
	if ok {
		return m
	}
	src := l.recordedSource(d.path, lines)
	s.checkRecorded(l, d.path, src)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := d.maps[l]; ok {
		return m
	}
	m = newLineMap(src, d.lines) // the buffer now: an edit may have come meanwhile
	d.maps[l] = m
	return m
}

// toCurrent and toRecorded read a line map under the server's lock: edits
// change it while diagnostics are published from the background.
func (s *Server) toCurrent(m *lineMap, recorded int) (int, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.toCurrent(recorded)
}

func (s *Server) toRecorded(m *lineMap, line int) (int, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.toRecorded(line)
}
