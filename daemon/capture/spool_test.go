package capture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spoolWith makes a spool directory of ours holding the given files.
func spoolWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSpoolClaimAndSetAside: the spool lists the snapshots with a sidecar,
// reads a sidecar whose pid is its name's, claims a pickle by renaming it (a
// second claim finds it gone), and sets a refused one aside under names the
// next scan skips.
func TestSpoolClaimAndSetAside(t *testing.T) {
	dir := spoolWith(t, map[string]string{
		"oom-4242-1700000000000-0.pickle": "not really a pickle",
		"oom-4242-1700000000000-0.json":   `{"pid": 4242, "host": "h", "argv": ["train.py"], "time_ms": 1700000000000, "captured": {"device": 1}}`,
		"oom-7-1700000000000-0.json":      `{"pid": 8}`,
		"notes.txt":                       "",
	})
	sp, err := OpenSpool(dir)
	if err != nil || sp == nil {
		t.Fatalf("OpenSpool: %v", err)
	}
	defer sp.Close()
	got := strings.Join(sp.Snapshots(), " ")
	if got != "oom-4242-1700000000000-0 oom-7-1700000000000-0" && got != "oom-7-1700000000000-0 oom-4242-1700000000000-0" {
		t.Errorf("snapshots %q", got)
	}
	if _, err := sp.Sidecar("oom-7-1700000000000-0"); err == nil || !strings.Contains(err.Error(), "names pid 8") {
		t.Errorf("a sidecar naming another pid: %v", err)
	}
	base := "oom-4242-1700000000000-0"
	side, err := sp.Sidecar(base)
	if err != nil || side.PID != 4242 || side.Host != "h" || side.Captured.Device != 1 {
		t.Fatalf("sidecar %+v: %v", side, err)
	}
	f, path, err := sp.Claim(base)
	if err != nil || f == nil || path != filepath.Join(dir, base+".pickle.importing") {
		t.Fatalf("claim: %v %q", err, path)
	}
	f.Close()
	if f, _, err := sp.Claim(base); f != nil || err != nil {
		t.Errorf("a second claim: %v %v (want nothing: taken)", f, err)
	}
	sp.SetAside(base)
	for _, name := range []string{base + ".pickle.refused", base + ".json.refused"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("set aside: %v", err)
		}
	}
	if got := strings.Join(sp.Snapshots(), " "); got != "oom-7-1700000000000-0" {
		t.Errorf("after setting aside: %q", got)
	}
}

// TestSpoolRefusesSharedDirectory: a spool others may write to is not read.
func TestSpoolRefusesSharedDirectory(t *testing.T) {
	dir := spoolWith(t, nil)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if sp, err := OpenSpool(dir); sp != nil || err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a world-writable spool: %v", err)
	}
	if sp, err := OpenSpool(filepath.Join(dir, "absent")); sp != nil || err != nil {
		t.Errorf("no spool: %v %v, want nothing", sp, err)
	}
}
