package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/daemontest"
	"github.com/vramscope/vramscope/internal/hostile"
)

// Escape sequences an attacker puts in a frame's names or a process's argv:
// retitle the window (OSC 0), clear the screen (CSI 2J), a C1 CSI on its
// own, and a right-to-left override that reorders the rest of the line.
const (
	evilFile = "train\x1b]0;pwned\x07.py"
	evilFunc = "step\x1b[2J\u009b31m\u202egnp.exe"
)

// reachesTerminal says whether out holds a byte a terminal acts on.
func reachesTerminal(out string) bool {
	return strings.ContainsAny(out, "\x1b\x07\u009b\u202e")
}

// TestTerminalEscapes: the text of analyze, diff and ps shows the escapes
// as text (\x1b...), never raw; JSON output carries the names unchanged.
func TestTerminalEscapes(t *testing.T) {
	entry := func(size uint64) []hostile.Entry {
		return []hostile.Entry{{Action: "alloc", Addr: 0, Size: size, TimeUS: 1}}
	}
	a := hostile.Write(t, "a.pickle", hostile.Named(entry(512), evilFile, evilFunc))
	b := hostile.Write(t, "b.pickle", hostile.Named(entry(1<<20), evilFile, evilFunc))
	for _, args := range [][]string{{"analyze", b}, {"diff", a, b}} {
		o := mustRun(t, args...)
		if reachesTerminal(o.stdout) || !strings.Contains(o.stdout, `train\x1b]0;pwned\x07.py`) {
			t.Errorf("%s: %q", args[0], o.stdout)
		}
	}
	var res struct {
		Sites []struct{ File, Function string }
	}
	if err := json.Unmarshal([]byte(mustRun(t, "analyze", "--json", b).stdout), &res); err != nil ||
		len(res.Sites) == 0 || res.Sites[0].File != evilFile || res.Sites[0].Function != evilFunc {
		t.Errorf("analyze --json changed the names: %+v %v", res.Sites, err)
	}
	socket := daemontest.Start(t).Socket
	daemontest.Agent(t, socket, api.RegisterParams{PID: 9300, Host: "test", WorldSize: 1,
		Argv: []string{"python", evilFile, evilFunc}, Recording: true}, a)
	o := mustRun(t, "ps", "--socket", socket)
	if reachesTerminal(o.stdout) || !strings.Contains(o.stdout, `python train\x1b]0;pwned\x07.py step\x1b[2J\u009b31m\u202egnp.exe`) {
		t.Errorf("ps: %q", o.stdout)
	}
}
