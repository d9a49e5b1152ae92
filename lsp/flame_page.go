package lsp

// flame_page.go serves "flame graph from here" to editors without the VS
// Code extension's webview: the linked report (the flame graph with the
// timeline, top lines and findings; the page `vramscope analyze --html`
// writes) as a file, opened in the browser through window/showDocument when
// the client takes it, else its path in a message and in the answer.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/flame"
	"go.lsp.dev/uri"
)

// flamePage writes the report of l with tree t and asks the client to open it.
func (s *Server) flamePage(l *loaded, t *flame.Tree, fn string) (any, error) {
	local, err := s.localReport(l.result) // the editor's file names, as the tree's
	if err != nil {
		return nil, err
	}
	rep, err := json.Marshal(local)
	if err != nil {
		return nil, failed(err.Error())
	}
	dir, err := reportDir()
	if err != nil {
		return nil, failed(err.Error())
	}
	name := trimExt(filepath.Base(l.path))
	if fn != "" {
		name += "-" + fn
	}
	name = nameless.ReplaceAllString(name, "_")
	path := filepath.Join(dir, name+".html")
	f, err := os.Create(path)
	if err != nil {
		return nil, failed("writing the flame graph: " + err.Error())
	}
	err = flame.WriteReport(f, t, rep)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, failed(fmt.Sprintf("writing the flame graph %s: %v", path, err))
	}
	page := command.FlamePage{Path: path, URI: string(uri.File(path))}
	page.Opened = s.openExternal(page.URI)
	if !page.Opened {
		s.showMessage(msgInfo, "vramscope: flame graph written to "+path)
	}
	return page, nil
}

// nameless is what a file name of a report leaves out.
var nameless = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func trimExt(name string) string { return name[:len(name)-len(filepath.Ext(name))] }

// reportDir is where flame pages go: the user's cache, not the workspace.
func reportDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "vramscope", "flame")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s for the flame graph: %w", dir, err)
	}
	return dir, nil
}

// openExternal asks the client to open u in the system's browser
// (window/showDocument, external); false when it cannot or did not.
func (s *Server) openExternal(u string) bool {
	return s.showDocument(map[string]any{"uri": u, "external": true})
}

// openInEditor asks the client to open u in the editor (window/showDocument).
func (s *Server) openInEditor(u string) bool {
	return s.showDocument(map[string]any{"uri": u, "takeFocus": true})
}

// showDocument sends window/showDocument when the client takes it; false
// when it cannot or did not open the document.
func (s *Server) showDocument(params map[string]any) bool {
	c := s.client()
	if c == nil || !s.caps().showDocument {
		return false
	}
	ctx, cancel := context.WithTimeout(s.lifeContext(), 30*time.Second)
	defer cancel()
	var res struct {
		Success bool `json:"success"`
	}
	if err := c.Call(ctx, "window/showDocument", params, &res); err != nil {
		return false
	}
	return res.Success
}
