package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/vramscope/vramscope/profiler"
	"go.lsp.dev/protocol"
)

func init() { register("textDocument/hover", (*Server).hover, false) }

// hover on a line that holds memory: its figures and the top stacks through it,
// each frame a link to its file and line.
func (s *Server) hover(_ context.Context, raw json.RawMessage) (any, error) {
	var p protocol.HoverParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	d, l := s.document(p.TextDocument.URI), s.shown()
	if d == nil || l == nil {
		return nil, nil
	}
	recorded, edited, ok := s.toRecorded(s.lineMap(d, l), int(p.Position.Line)+1)
	if !ok {
		return nil, nil
	}
	site, ok := s.paths.sitesIn(l, d.path)[recorded]
	if !ok {
		return nil, nil
	}
	// Short lines, not a table: VS Code draws hover tables without cell
	// padding (labels ran into values), and a hover taller than about 250
	// pixels scrolls, hiding the stacks.
	var b strings.Builder
	fmt.Fprintf(&b, "**vramscope** · `%s`: **%s** live at peak (%.1f%% of %s) in %s\n\n", place(profiler.Frame{File: site.File, Line: site.Line}),
		profiler.FormatBytes(site.PeakBytes), 100*site.PeakShare, profiler.FormatBytes(l.result.Peak.Bytes), plural(site.PeakAllocs, "block"))
	facts := []string{
		"alive at snapshot: " + profiler.FormatBytes(site.CurrentBytes),
		fmt.Sprintf("allocated: %s in %s", profiler.FormatBytes(site.AllocBytes), plural(site.Allocs, "allocation")),
		"largest: " + profiler.FormatBytes(site.MaxAlloc),
	}
	if cats := site.Categories.Named(); len(cats) > 0 {
		var parts []string
		for _, c := range cats {
			parts = append(parts, fmt.Sprintf("%s %s (%.0f%%)", strings.ReplaceAll(c.Name, "_", " "), profiler.FormatBytes(c.Bytes), 100*c.Share))
		}
		facts = append(facts, "at peak, by kind: "+strings.Join(parts, ", "))
	}
	b.WriteString(strings.Join(facts, " · ") + "\n")
	if edited {
		fmt.Fprintf(&b, "\n_These figures are from before this line was edited (it read `` %s ``)._\n", strings.TrimSpace(s.recordedText(l, d, recorded)))
	}
	stacks := l.index.Stacks(site.File, site.Line, hoverStacks)
	if len(stacks) > 0 {
		b.WriteString("\n**Top stacks through this line** (what it called, innermost last)\n\n")
	}
	for i, st := range stacks {
		fmt.Fprintf(&b, "%d. **%s** at peak (%s allocated): ", i+1, profiler.FormatBytes(st.PeakBytes), profiler.FormatBytes(st.AllocBytes))
		var parts []string
		for _, f := range calledFrom(st.Frames, site.File, site.Line) {
			if f.File == "" && f.Func == elided {
				parts = append(parts, elided)
				continue
			}
			parts = append(parts, s.frameLink(f))
		}
		b.WriteString(strings.Join(parts, " › "))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n_snapshot: %s_", escapeMD(filepath.Base(l.path)))
	return protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: b.String()}}, nil
}

// frameLink is a frame as a markdown link to its local file and line, or as
// plain text when it has no file (a named phase, a frameless pass).
func (s *Server) frameLink(f profiler.Frame) string {
	if f.File == "" {
		return escapeMD(f.Func)
	}
	local := s.paths.local(f.File)
	u := url.URL{Scheme: "file", Path: local, Fragment: fmt.Sprintf("L%d", f.Line)}
	return fmt.Sprintf("[%s](%s)", escapeMD(place(f)), u.String())
}

// escapeMD escapes what markdown would read as markup. An underscore between
// two letters or digits (modeling_gpt2.py) cannot start or end emphasis, so
// it stays as it is: editors that show the markdown's source (Neovim) showed
// modeling\_gpt2.py.
func escapeMD(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' && i > 0 && i+1 < len(s) && word(s[i-1]) && word(s[i+1]):
		case strings.IndexByte("[]*_`|\\", c) >= 0:
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

func word(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// recordedText is a recorded line's text as the server first read the file.
func (s *Server) recordedText(l *loaded, d *document, line int) string {
	src := l.recordedSource(d.path, nil)
	if line < 1 || line > len(src) {
		return ""
	}
	return src[line-1]
}

// elided stands for the frames a hover's stack leaves out.
const elided = "…"

// hoverStacks is how many stacks a hover lists: with one line each, the
// hover fits without scrolling (the flame graph from the lens has the rest).
const hoverStacks = 3

// calledFrom shortens a stack (outermost first) for a hover on file:line: the
// callers above the line are left out (the hover is on the line), and of what
// it called only the first frame and the innermost are kept, so each stack
// is one line in the hover. A stack that does not pass the line is kept
// whole, shortened the same way.
func calledFrom(frames []profiler.Frame, file string, line int) []profiler.Frame {
	rest := frames
	for i, f := range frames {
		if f.File == file && f.Line == line {
			rest = frames[i+1:]
			break
		}
	}
	if len(rest) == 0 {
		return frames[len(frames)-1:]
	}
	if len(rest) <= 3 {
		return rest
	}
	return []profiler.Frame{rest[0], {Func: elided}, rest[len(rest)-1]}
}
