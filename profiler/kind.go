package profiler

import (
	"path"
	"strings"
)

// FrameKind is how a frame reads to the user: their own code, someone else's
// (an installed library, PyTorch, the interpreter), or a frame that stands for
// no source at all (the flame graph's root, "[N frames elided]"). It is
// decided here once and travels on every flame-graph node (flame.Node.Kind),
// so that the renderers in JavaScript and Python draw it and never re-derive
// it: when each did, they disagreed with the engine on five of seven paths.
type FrameKind string

// The frame kinds (flame.js's palette has one colour for each).
const (
	KindUser      FrameKind = "user"
	KindLibrary   FrameKind = "library"
	KindSynthetic FrameKind = "synthetic"
)

// KindOfFile is the kind of a frame in file: synthetic without a file, the
// user's where IsUserFile says so, a library's otherwise.
func KindOfFile(file string) FrameKind {
	switch {
	case file == "":
		return KindSynthetic
	case IsUserFile(file):
		return KindUser
	}
	return KindLibrary
}

// IsUserFile reports whether a frame's file is the user's own code rather than
// an installed library, PyTorch itself, or the interpreter.
func IsUserFile(file string) bool {
	file = strings.ReplaceAll(file, "\\", "/")
	if strings.Contains(file, "<ipython-input") || strings.Contains(file, "/ipykernel_") {
		return true
	}
	if file == "" || file == "??" || strings.HasPrefix(file, "<") {
		return false
	}
	for _, lib := range []string{"site-packages/", "dist-packages/", "/lib/python", "/torch/", "/_pytest/"} {
		if strings.Contains(file, lib) {
			return false
		}
	}
	// vramscope's own agent (its backward() wrapper sits on every backward
	// stack) is a library wherever it is installed from.
	dir, base := path.Split(file)
	if strings.HasSuffix(dir, "vramscope/") && strings.HasPrefix(base, "_") {
		return false
	}
	return strings.HasSuffix(file, ".py")
}
