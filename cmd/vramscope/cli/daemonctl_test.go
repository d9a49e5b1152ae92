package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusAdvice: `vramscope status` advises starting a daemon only when
// there is none; a daemon that is there but hangs up says so instead (the
// campaign's flooded daemon got "start one with vramscope serve").
func TestStatusAdvice(t *testing.T) {
	dir := t.TempDir()
	if o := run("status", "--socket", filepath.Join(dir, "none.sock")); o.code != 1 || !strings.Contains(o.stderr, "start one") {
		t.Errorf("no daemon: %v", o)
	}
	sock := filepath.Join(dir, "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close() // there, but hangs up at once
		}
	}()
	if o := run("status", "--socket", sock); o.code != 1 || strings.Contains(o.stderr, "start one") || !strings.Contains(o.stderr, sock) {
		t.Errorf("a daemon that hangs up: %v", o)
	}
}

// TestServeFlagErrors: flag values the daemon cannot use exit 2 with one
// line naming the flag, before anything is started.
func TestServeFlagErrors(t *testing.T) {
	dir := t.TempDir()
	base := []string{"serve", "--socket", filepath.Join(dir, "d.sock"), "--data-dir", filepath.Join(dir, "data"), "--no-counters"}
	for _, tc := range [][]string{
		{"--max-gib", "1e30"},
		{"--max-gib", "NaN"},
		{"--max-gib", "-1"},
		{"--max-gib", "0"},
		{"--max-snapshots", "-5"},
		{"--interval", "-1s"},
	} {
		o := run(append(append([]string{}, base...), tc...)...)
		if o.code != 2 || !strings.Contains(o.stderr, tc[0]) || strings.Count(strings.TrimSuffix(o.stderr, "\n"), "\n") != 0 || strings.Contains(o.stderr, "{") {
			t.Errorf("serve %s: %v", strings.Join(tc, " "), o)
		}
	}
}

// TestServeRefusesUnsafeDataDir: a --data-dir others may write to, or one
// with a planted lock symlink, stops serve before it listens, in one line
// naming the path and the problem; the symlink's target is untouched.
func TestServeRefusesUnsafeDataDir(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	planted := filepath.Join(dir, "planted")
	os.Mkdir(planted, 0o700)
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep me\n"), 0o600)
	os.Symlink(target, filepath.Join(planted, "lock"))
	for data, want := range map[string]string{open: open + " is writable by others", planted: filepath.Join(planted, "lock") + " is a symbolic link"} {
		sock := filepath.Join(dir, "d.sock")
		o := run("serve", "--quiet", "--socket", sock, "--data-dir", data, "--spool", "-", "--no-counters")
		if o.code != 1 || !strings.Contains(o.stderr, want) || strings.Count(strings.TrimSuffix(o.stderr, "\n"), "\n") != 0 {
			t.Errorf("serve --data-dir %s: %v", data, o)
		}
		if _, err := os.Lstat(sock); err == nil {
			t.Errorf("serve --data-dir %s made its socket", data)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Errorf("the lock symlink's target now reads %q", b)
	}
}
