package lsp

import "encoding/json"

// clientCaps is what the editor said it can take (initialize's
// capabilities): the server sends a request to the client only when the
// client advertised it. Neovim, for one, logs a warning for a refresh it did
// not ask for, and a client without showDocument gets the flame graph's path.
type clientCaps struct {
	inlayHintRefresh bool // workspace.inlayHint.refreshSupport
	codeLensRefresh  bool // workspace.codeLens.refreshSupport
	showDocument     bool // window.showDocument.support
	workDoneProgress bool // window.workDoneProgress
}

func parseClientCaps(raw json.RawMessage) clientCaps {
	type refresh struct {
		RefreshSupport bool `json:"refreshSupport"`
	}
	var c struct {
		Workspace struct {
			CodeLens  refresh `json:"codeLens"`
			InlayHint refresh `json:"inlayHint"`
		} `json:"workspace"`
		Window struct {
			WorkDoneProgress bool `json:"workDoneProgress"`
			ShowDocument     struct {
				Support bool `json:"support"`
			} `json:"showDocument"`
		} `json:"window"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &c) != nil {
		return clientCaps{} // a malformed capability object: assume the least
	}
	return clientCaps{
		inlayHintRefresh: c.Workspace.InlayHint.RefreshSupport,
		codeLensRefresh:  c.Workspace.CodeLens.RefreshSupport,
		showDocument:     c.Window.ShowDocument.Support,
		workDoneProgress: c.Window.WorkDoneProgress,
	}
}

func (s *Server) caps() clientCaps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientCaps
}
