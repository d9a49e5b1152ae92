package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
)

// TestBadImports: every import that cannot work fails with a code and a
// message that say what is wrong with the file the client named (never the
// daemon's copy of it), and leaves nothing behind.
func TestBadImports(t *testing.T) {
	d, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	dir := t.TempDir()
	notPickle := filepath.Join(dir, "notes.pickle")
	os.WriteFile(notPickle, []byte("this is not a pickle\n"), 0o644)
	fifo := filepath.Join(dir, "pipe.pickle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    api.ImportParams
		code int64
		says []string
	}{
		{api.ImportParams{Path: "/nonexistent/x.pickle"}, api.CodeBadSnapshot, []string{"/nonexistent/x.pickle", "no such file"}},
		{api.ImportParams{Path: notPickle}, api.CodeBadSnapshot, []string{notPickle + ": ", "not a pickle"}},
		{api.ImportParams{Path: dir}, api.CodeBadSnapshot, []string{dir + " is a directory, not a snapshot file"}},
		{api.ImportParams{Path: fifo}, api.CodeBadSnapshot, []string{fifo + " is a named pipe (FIFO), not a snapshot file"}},
		{api.ImportParams{Path: ""}, api.CodeInvalidParams, []string{"needs a path"}},
		{api.ImportParams{Path: "notes.pickle"}, api.CodeInvalidParams, []string{`"notes.pickle" is a relative path`, "absolute"}},
		{api.ImportParams{Path: "notes.pickle", Cwd: "rel"}, api.CodeInvalidParams, []string{`cwd "rel" is not an absolute path`}},
		{api.ImportParams{Path: "notes.pickle", Cwd: dir}, api.CodeBadSnapshot, []string{notPickle + ": ", "not a pickle"}},
	} {
		err := c.Call(context.Background(), api.SnapshotImport, tc.p, nil)
		if client.Code(err) != tc.code {
			t.Errorf("import %+v: %v (code %d), want code %d", tc.p, err, client.Code(err), tc.code)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("import %+v: %q does not say %q", tc.p, err, s)
			}
		}
		if strings.Contains(err.Error(), ".part") || strings.Contains(err.Error(), d.store.IncomingDir()) {
			t.Errorf("import %+v: %q names the daemon's copy", tc.p, err)
		}
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots listed after failed imports", n)
	}
	if left, _ := os.ReadDir(d.store.IncomingDir()); len(left) != 0 {
		t.Errorf("incoming dir keeps %d files", len(left))
	}
}

// TestImportRelativeToClient: a relative path is the client's, resolved
// against the cwd it sends.
func TestImportRelativeToClient(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	var r api.SnapshotResult
	call(t, c, api.SnapshotImport, api.ImportParams{Path: "oom_batch.pickle", Cwd: mustAbs(fixtures)}, &r)
	if r.Source != mustAbs(fixtures+"oom_batch.pickle") {
		t.Errorf("source %q", r.Source)
	}
}

// TestParamsErrorsInWords: params of the wrong JSON type are answered in
// plain words naming the field, not with Go's unmarshalling message.
func TestParamsErrorsInWords(t *testing.T) {
	_, cfg := testDaemon(t)
	c := dial(t, cfg.Socket)
	for _, tc := range []struct {
		method, params, says string
	}{
		{api.SnapshotList, `{"limit": "ten"}`, `"limit" must be an integer, not a string`},
		{api.SnapshotList, `{"limit": 1.5}`, `"limit" must be an integer, not 1.5`},
		{api.SnapshotGet, `{"id": 12}`, `"id" must be a string, not a number`},
		{api.AnalysisWhatIf, `{"snapshots": [{"id": "a", "size": "big"}]}`, `"snapshots.size" must be a number, not a string`},
		{api.Subscribe, `{"topics": "all"}`, `"topics" must be a list, not a string`},
		{api.SnapshotList, `[1]`, `params must be an object, not a list`},
	} {
		err := c.Call(context.Background(), tc.method, json.RawMessage(tc.params), nil)
		if client.Code(err) != api.CodeInvalidParams || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s %s: %v, want %q", tc.method, tc.params, err, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "Go struct") {
			t.Errorf("%s %s: %q speaks Go", tc.method, tc.params, err)
		}
	}
}
