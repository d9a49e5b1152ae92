// html.go writes the standalone flame-graph page (one self-contained HTML file,
// no network at view time) and hands the shared web assets to the other front
// ends, so the VS Code webview and the notebook widget run the very same
// flame.js and flame.css.

package flame

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"

	"github.com/vramscope/vramscope/profiler"
)

var (
	// The flame graph alone, the page around it, and the linked report (the
	// timeline, the moments and the composition of every view): web/files.json's parts.
	script       = joinPart(webFiles.Scripts, "flame")
	stylesheet   = joinPart(webFiles.Styles, "flame")
	pageCSS      = joinPart(webFiles.Styles, "page")
	reportScript = joinPart(webFiles.Scripts, "report")
	reportCSS    = joinPart(webFiles.Styles, "report")
	pageTmpl     = template.Must(template.New("page.html").ParseFS(webFS, "web/page.html"))
)

// Script returns the flame graph's scripts (web/files.json's part "flame"),
// which define globalThis.VramscopeFlame.
func Script() string { return script }

// Stylesheet returns the flame graph's styles (part "flame": flame.css).
func Stylesheet() string { return stylesheet }

type pageData struct {
	Title   string
	Weight  Weight
	Total   string
	Nodes   string
	CSS     template.CSS
	PageCSS template.CSS
	Script  template.JS
	Data    template.JS
	// The linked report (WriteReport); empty for a flame graph alone.
	ReportCSS    template.CSS
	ReportScript template.JS
	Report       template.JS
}

// WriteHTML writes t as a self-contained HTML page: styles, script and data
// inlined, no external URL.
func WriteHTML(w io.Writer, t *Tree) error {
	if t == nil || t.Root == nil {
		return errors.New("flame: WriteHTML of an empty tree")
	}
	// json.Marshal escapes <, >, & and U+2028/U+2029, so the data can neither
	// close its script element nor open an HTML comment inside it.
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("flame: encoding tree: %w", err)
	}
	return pageTmpl.Execute(w, newPageData(t, data))
}

func newPageData(t *Tree, data []byte) pageData {
	title := t.Title
	if title == "" {
		title = "GPU memory"
	}
	return pageData{
		Title:   title,
		Weight:  t.Weight,
		Total:   profiler.FormatBytes(t.Root.Value),
		Nodes:   profiler.FormatCount(int64(t.NumNodes())),
		CSS:     template.CSS(stylesheet),
		PageCSS: template.CSS(pageCSS),
		Script:  template.JS(script),
		Data:    template.JS(data),
	}
}

// ReportScript returns the linked report's scripts (web/files.json's part
// "report"), which define globalThis.VramscopeReport and the views it composes.
func ReportScript() string { return reportScript }

// ReportStylesheet returns the linked report's styles (part "report").
func ReportStylesheet() string { return reportCSS }

// WriteReport writes the linked report: the timeline, the flame graph of t,
// the top lines, categories and findings. report is the JSON object of
// analyze's Result.Report (profiler/flame cannot import analyze).
func WriteReport(w io.Writer, t *Tree, report []byte) error {
	if t == nil || t.Root == nil {
		return errors.New("flame: WriteReport of an empty tree")
	}
	if !json.Valid(report) {
		return errors.New("flame: WriteReport: the report is not JSON")
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("flame: encoding tree: %w", err)
	}
	// Re-encoding escapes <, >, & and U+2028/U+2029 as WriteHTML's data.
	var rep bytes.Buffer
	if err := json.Compact(&rep, report); err != nil {
		return err
	}
	esc := bytes.Buffer{}
	json.HTMLEscape(&esc, rep.Bytes())
	d := newPageData(t, data)
	d.ReportCSS = template.CSS(reportCSS)
	d.ReportScript = template.JS(reportScript)
	d.Report = template.JS(esc.String())
	return pageTmpl.Execute(w, d)
}
