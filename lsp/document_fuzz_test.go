package lsp

import (
	"strings"
	"testing"

	"go.lsp.dev/protocol"
)

// FuzzDocumentChange applies arbitrary ranged changes (out of range, reversed,
// inside multi-byte characters) to a document with a line map: no panic, the
// map's buffer stays the document's, and every recorded line the map places
// points back to itself.
func FuzzDocumentChange(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0}, "# new\n")
	f.Add([]byte{21, 4, 21, 40}, "out = net(x)")
	f.Add([]byte{200, 9, 3, 1}, "é\r\n\n")
	f.Add([]byte{5, 0, 30, 0, 1, 0, 1, 0}, "")
	base := strings.Split("import torch\n\ndef f(x):\n    y = x * 2  # é\n    return y\n\nf(torch.ones(3))\n", "\n")
	f.Fuzz(func(t *testing.T, ops []byte, text string) {
		d := newDocument("file:///x.py", strings.Join(base, "\n"))
		m := newLineMap(base, d.lines)
		d.maps[nil] = m
		for i := 0; i+3 < len(ops); i += 4 {
			r := protocol.Range{Start: protocol.Position{Line: uint32(ops[i]), Character: uint32(ops[i+1])},
				End: protocol.Position{Line: uint32(ops[i+2]), Character: uint32(ops[i+3])}}
			d.change(&r, text)
		}
		if strings.Join(m.cur, "\n") != strings.Join(d.lines, "\n") || len(m.origin) != len(d.lines) {
			t.Fatalf("the map's buffer %q is not the document's %q", m.cur, d.lines)
		}
		for r := 1; r <= len(base); r++ {
			if line, _, ok := m.toCurrent(r); ok {
				if back, _, ok := m.toRecorded(line); !ok || back != r {
					t.Fatalf("recorded %d -> %d -> %d", r, line, back)
				}
			}
		}
	})
}
