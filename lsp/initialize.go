package lsp

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/vramscope/vramscope/lsp/command"
	"go.lsp.dev/protocol"
)

func init() { register("initialize", (*Server).initialize, false) }

// Commands the server executes (workspace/executeCommand), in the table's
// order; the extension's commands_gen.ts is generated from the same table.
var commandNames = func() []string {
	var out []string
	for _, c := range command.Commands {
		out = append(out, c.Name)
	}
	return out
}()

func (s *Server) initialize(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		RootURI               protocol.DocumentURI       `json:"rootUri"`
		WorkspaceFolders      []protocol.WorkspaceFolder `json:"workspaceFolders"`
		InitializationOptions json.RawMessage            `json:"initializationOptions"`
		Capabilities          json.RawMessage            `json:"capabilities"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	var roots []string
	for _, f := range p.WorkspaceFolders {
		if d := filename(protocol.DocumentURI(f.URI)); d != "" {
			roots = append(roots, d)
		}
	}
	if len(roots) == 0 {
		if d := filename(p.RootURI); d != "" {
			roots = append(roots, d)
		}
	}
	s.mu.Lock()
	s.roots = roots
	s.clientCaps = parseClientCaps(p.Capabilities)
	s.settings = s.settings.merge(p.InitializationOptions)
	if s.cfg.Snapshot != "" && s.settings.Snapshot == "" {
		s.settings.Snapshot, _ = filepath.Abs(s.cfg.Snapshot) // a flag: the working directory's
	}
	s.mu.Unlock()
	st := s.resolveSettings()
	s.resetPaths(st)

	caps := serverCapabilities{
		ServerCapabilities: protocol.ServerCapabilities{
			TextDocumentSync: protocol.TextDocumentSyncOptions{
				OpenClose: true,
				Change:    protocol.TextDocumentSyncKindIncremental,
			},
			HoverProvider:          true,
			CodeLensProvider:       &protocol.CodeLensOptions{},
			CodeActionProvider:     &protocol.CodeActionOptions{CodeActionKinds: []protocol.CodeActionKind{protocol.QuickFix}},
			ExecuteCommandProvider: &protocol.ExecuteCommandOptions{Commands: commandNames},
		},
		InlayHintProvider: &InlayHintOptions{},
	}
	return initializeResult{Capabilities: caps, ServerInfo: &protocol.ServerInfo{Name: "vramscope", Version: Version}}, nil
}

// Version is the server's version, set by the CLI.
var Version = "dev"

// resolveSettings resolves the snapshot setting inWorkspace and returns the settings.
func (s *Server) resolveSettings() Settings {
	st := s.currentSettings()
	snap := s.inWorkspace(st.Snapshot)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings.Snapshot = snap
	return s.settings
}

// resetPaths rebuilds the path map from the settings and workspace folders,
// telling the user about a malformed rule.
func (s *Server) resetPaths(st Settings) {
	s.mu.Lock()
	roots := append([]string(nil), s.roots...)
	s.mu.Unlock()
	for _, err := range s.paths.reset(s.mapRules(st.PathMap), roots) {
		s.showMessage(msgWarning, "vramscope: "+err.Error())
	}
}
