package lsp

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
)

// TestEmacs runs lsp/testdata/emacs/session.el in a batch Emacs with eglot
// against the real server, set up as docs/editors.md says: it attaches, the
// OOM's diagnostic reaches flymake on its line, hovers, keeps the diagnostic
// on its statement after two lines are inserted above, and runs the
// flame-graph command. make setup installs Debian's emacs-nox and
// elpa-eglot; without them the test skips, and fails in CI.
func TestEmacs(t *testing.T) {
	emacs, err := exec.LookPath("emacs")
	if err != nil {
		reftool.Missing(t, "emacs is not installed (make setup, or apt-get install emacs-nox elpa-eglot)")
	}
	probe := exec.Command(emacs, "--batch", "-q", "--eval", "(progn (require 'package) (package-initialize) (require 'eglot))")
	if out, err := probe.CombinedOutput(); err != nil {
		reftool.Missing(t, "emacs has no eglot (make setup, or apt-get install elpa-eglot; Emacs 29+ has it built in): %v\n%s", err, out)
	}
	bin := buildVramscope(t)
	dir := t.TempDir()
	result := filepath.Join(dir, "result.json")
	cmd := exec.Command(emacs, "--batch", "-q", "-l", "testdata/emacs/session.el")
	cmd.Env = append(os.Environ(), "HOME="+dir, "VRAMSCOPE_BIN="+bin, "VRAMSCOPE_FIXTURES="+fixtures,
		"VRAMSCOPE_SNAPSHOT="+filepath.Join(fixtures, "snapshots/oom_batch.pickle"), "VRAMSCOPE_RESULT="+result,
		"XDG_CACHE_HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_RUNTIME_DIR="+dir)
	runSession(t, cmd, result, 5)
}
