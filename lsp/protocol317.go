package lsp

import "go.lsp.dev/protocol"

// LSP 3.17 types that go.lsp.dev/protocol v0.12.0 (LSP 3.16) lacks.

// InlayHintParams is textDocument/inlayHint's request.
type InlayHintParams struct {
	TextDocument protocol.TextDocumentIdentifier `json:"textDocument"`
	Range        protocol.Range                  `json:"range"`
}

// InlayHint is one hint; Kind 1 is a type hint, 2 a parameter hint, and
// neither is ours, so it is left out.
type InlayHint struct {
	Position     protocol.Position `json:"position"`
	Label        string            `json:"label"`
	Tooltip      string            `json:"tooltip,omitempty"`
	PaddingLeft  bool              `json:"paddingLeft,omitempty"`
	PaddingRight bool              `json:"paddingRight,omitempty"`
}

// InlayHintOptions is the server capability.
type InlayHintOptions struct {
	ResolveProvider bool `json:"resolveProvider"`
}

// serverCapabilities adds the 3.17 inlay-hint capability to 3.16's.
type serverCapabilities struct {
	protocol.ServerCapabilities
	InlayHintProvider *InlayHintOptions `json:"inlayHintProvider,omitempty"`
}

type initializeResult struct {
	Capabilities serverCapabilities   `json:"capabilities"`
	ServerInfo   *protocol.ServerInfo `json:"serverInfo,omitempty"`
}

// Requests the server sends to refresh what the client shows.
const (
	methodInlayHintRefresh = "workspace/inlayHint/refresh"
	methodCodeLensRefresh  = "workspace/codeLens/refresh"
)
