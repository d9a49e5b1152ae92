package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
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
	line := int(p.Position.Line) + 1
	site, ok := s.paths.sitesIn(l, d.path)[line]
	if !ok {
		return nil, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**vramscope** · `%s`\n\n", place(profiler.Frame{File: site.File, Line: site.Line}))
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| live at peak | %s (%.1f%% of %s) in %s |\n", profiler.FormatBytes(site.PeakBytes), 100*site.PeakShare,
		profiler.FormatBytes(l.result.Peak.Bytes), plural(site.PeakAllocs, "block"))
	fmt.Fprintf(&b, "| alive at snapshot | %s |\n", profiler.FormatBytes(site.CurrentBytes))
	fmt.Fprintf(&b, "| allocated in total | %s in %s |\n", profiler.FormatBytes(site.AllocBytes), plural(site.Allocs, "allocation"))
	fmt.Fprintf(&b, "| largest | %s |\n", profiler.FormatBytes(site.MaxAlloc))
	if cats := site.Categories.Named(); len(cats) > 0 {
		var parts []string
		for _, c := range cats {
			parts = append(parts, fmt.Sprintf("%s %s (%.0f%%)", strings.ReplaceAll(c.Name, "_", " "), profiler.FormatBytes(c.Bytes), 100*c.Share))
		}
		fmt.Fprintf(&b, "| at peak, by kind | %s |\n", strings.Join(parts, ", "))
	}
	stacks := l.index.Stacks(site.File, site.Line, 5)
	if len(stacks) > 0 {
		b.WriteString("\n**Top stacks through this line** (innermost last)\n\n")
	}
	for i, st := range stacks {
		fmt.Fprintf(&b, "%d. %s at peak, %s allocated: ", i+1, profiler.FormatBytes(st.PeakBytes), profiler.FormatBytes(st.AllocBytes))
		var parts []string
		for _, f := range st.Frames {
			parts = append(parts, s.frameLink(f))
		}
		b.WriteString(strings.Join(parts, " › "))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n_snapshot: %s_", l.path)
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

func escapeMD(s string) string {
	r := strings.NewReplacer("[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`", "|", "\\|")
	return r.Replace(s)
}
