package lsp

import "encoding/json"

// Settings is the server's one typed configuration, read from the client's
// initializationOptions and workspace/didChangeConfiguration ({"vramscope":
// {...}}). The extension's package.json documents the same keys.
type Settings struct {
	// Snapshot is a snapshot file to show (offline mode needs nothing else); a
	// relative path is inside the first workspace folder, ~/ the home folder.
	Snapshot string `json:"snapshot"`
	// HintThreshold hides hints for lines holding less than this share of the peak.
	HintThreshold float64 `json:"hintThreshold"`
	// PathMap rewrites recorded paths: "REMOTE=LOCAL" prefixes, tried in order
	// before the automatic suffix match inside the workspace.
	PathMap []string `json:"pathMap"`
	// FollowNewSnapshots shows each snapshot the daemon stores as it lands.
	FollowNewSnapshots bool `json:"followNewSnapshots"`
	// Weight of hints and flame graphs: "peak" (default) or "alloc".
	Weight string `json:"weight"`
}

func defaultSettings() Settings {
	return Settings{HintThreshold: 0.01, FollowNewSnapshots: true, Weight: "peak"}
}

// merge reads a settings object over the current values; keys it lacks keep
// theirs. It accepts {"vramscope": {...}} or the inner object.
func (st Settings) merge(raw json.RawMessage) Settings {
	if len(raw) == 0 {
		return st
	}
	var wrapped struct {
		Vramscope json.RawMessage `json:"vramscope"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Vramscope) > 0 {
		raw = wrapped.Vramscope
	}
	next := st
	if json.Unmarshal(raw, &next) != nil {
		return st
	}
	if next.HintThreshold < 0 || next.HintThreshold > 1 {
		next.HintThreshold = st.HintThreshold
	}
	if next.Weight != "alloc" {
		next.Weight = "peak"
	}
	return next
}
