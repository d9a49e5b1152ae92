package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveOnce runs a daemon with cfg until it fails or the test ends, and
// returns Serve's error (nil when it is serving).
func serveOnce(t *testing.T, cfg Config) error {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.NoCounters = true
	d, err := New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Serve(ctx) }()
	for i := 0; i < 200; i++ {
		select {
		case err := <-errc:
			cancel()
			return err
		default:
		}
		if c, err := net.Dial("unix", cfg.Socket); err == nil {
			c.Close()
			if cfg.TCP == "" || d.Addr() != "" {
				t.Cleanup(func() { cancel(); <-errc })
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	t.Fatal("the daemon neither failed nor served")
	return nil
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// TestSharedSocketDirLeftAlone: a socket in a shared sticky directory (as
// /tmp) leaves the directory's mode as it was; the campaign saw a 1777
// directory turned 0700.
func TestSharedSocketDirLeftAlone(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "tmp")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777|os.ModeSticky) // os.Chmod takes Go's sticky bit, not 01000
	before := mode(t, shared)
	sock := filepath.Join(shared, "vs.sock")
	if err := serveOnce(t, Config{Socket: sock, TCP: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if after := mode(t, shared); after != before {
		t.Errorf("the shared directory went from %v to %v", before, after)
	}
	if m := mode(t, sock).Perm(); m != 0o600 {
		t.Errorf("socket mode %v", m)
	}
	if m := mode(t, sock+".token").Perm(); m != 0o600 {
		t.Errorf("token mode %v", m)
	}
}

// TestOpenSocketDirRefused: a directory others may write to without the
// sticky bit would let them swap the socket; the daemon refuses it and leaves
// it alone.
func TestOpenSocketDirRefused(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	err := serveOnce(t, Config{Socket: filepath.Join(open, "vs.sock")})
	if err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("serve in a 0777 directory: %v", err)
	}
	if m := mode(t, open).Perm(); m != 0o777 {
		t.Errorf("the directory became %v", m)
	}
}

// TestSocketPathNotReplaced: a file that is not a socket, or the socket of a
// live daemon, stays where it is and the second daemon says why it stops;
// the live daemon keeps its socket and its token.
func TestSocketPathNotReplaced(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "notes.txt")
	os.WriteFile(regular, []byte("precious"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.Symlink(regular, filepath.Join(dir, "link"))
	for name, says := range map[string]string{"notes.txt": "a regular file", "sub": "a directory", "link": "a symbolic link"} {
		err := serveOnce(t, Config{Socket: filepath.Join(dir, name)})
		if err == nil || !strings.Contains(err.Error(), "is not a socket ("+says+")") {
			t.Errorf("socket path %s: %v", name, err)
		}
	}
	if b, err := os.ReadFile(regular); string(b) != "precious" {
		t.Errorf("the regular file now reads %q (%v)", b, err)
	}

	sock := filepath.Join(dir, "run", "d.sock")
	if err := serveOnce(t, Config{Socket: sock, TCP: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	token, _ := os.ReadFile(sock + ".token")
	err := serveOnce(t, Config{Socket: sock, TCP: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Errorf("a second daemon on a live socket: %v", err)
	}
	if now, _ := os.ReadFile(sock + ".token"); string(now) != string(token) {
		t.Error("the second daemon rewrote the first one's token")
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Errorf("the first daemon lost its socket: %v", err)
	} else {
		c.Close()
	}
}

// TestDeadSocketReplaced: a socket nobody answers on (a daemon that was
// killed) is ours to replace.
func TestDeadSocketReplaced(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if err := serveOnce(t, Config{Socket: sock}); err != nil {
		t.Fatal(err)
	}
}

// TestTokenFileNotOverwritten: a file at the token path that a daemon did
// not write stays as it is and the daemon refuses to start; its own token
// from an earlier run is replaced, and removed when it stops.
func TestTokenFileNotOverwritten(t *testing.T) {
	dir := t.TempDir()
	theirs := filepath.Join(dir, "token")
	os.WriteFile(theirs, []byte("ghp_someone_elses_api_token\n"), 0o600)
	err := serveOnce(t, Config{Socket: filepath.Join(dir, "d.sock"), TCP: "127.0.0.1:0", TokenFile: theirs})
	if err == nil || !strings.Contains(err.Error(), "not a vramscope token") {
		t.Errorf("serve with a foreign token file: %v", err)
	}
	if b, _ := os.ReadFile(theirs); string(b) != "ghp_someone_elses_api_token\n" {
		t.Errorf("the foreign token file now reads %q", b)
	}

	ours := filepath.Join(dir, "d.sock.token")
	old := strings.Repeat("ab", 32) + "\n"
	os.WriteFile(ours, []byte(old), 0o600)
	d, err := New(Config{Socket: filepath.Join(dir, "d.sock"), DataDir: t.TempDir(), TCP: "127.0.0.1:0", NoCounters: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	waitSocket(t, filepath.Join(dir, "d.sock"))
	// The token is written once the TCP listener is up: wait for the file,
	// not for the listener (a soak run read it in between).
	var b []byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if b, _ = os.ReadFile(ours); string(b) != old && len(b) == len(old) {
			break
		}
	}
	if string(b) == old || len(b) != len(old) {
		t.Errorf("the token of an earlier run was not replaced: %q", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ours, filepath.Join(dir, "d.sock")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after the daemon stopped", p)
		}
	}
}
