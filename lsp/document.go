package lsp

import (
	"strings"
	"unicode/utf16"

	"go.lsp.dev/protocol"
)

// document is an open text document: its file name and its lines.
type document struct {
	uri   protocol.DocumentURI
	path  string
	lines []string
}

func newDocument(uri protocol.DocumentURI, text string) *document {
	return &document{uri: uri, path: filename(uri), lines: strings.Split(text, "\n")}
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

func (s *Server) document(uri protocol.DocumentURI) *document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[string(uri)]
}
