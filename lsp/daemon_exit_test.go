package lsp

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/client"
)

// TestAutoDaemonGoesWithTheEditor: the daemon `vramscope lsp --daemon auto`
// starts when none runs stops once the editor has closed the server.
func TestAutoDaemonGoesWithTheEditor(t *testing.T) {
	bin := buildVramscope(t)
	dir, err := os.MkdirTemp("", "vs") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "d.sock")
	cmd := exec.Command(bin, "lsp", "--daemon", "auto", "--socket", socket)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir, "XDG_STATE_HOME="+dir, "XDG_CACHE_HOME="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stdout)
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootUri":null,"capabilities":{}}}`,
		`{"jsonrpc":"2.0","method":"initialized","params":{}}`,
	} {
		fmt.Fprintf(stdin, "Content-Length: %d\r\n\r\n%s", len(m), m)
	}
	up := false
	for end := time.Now().Add(20 * time.Second); !up && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c, err := client.Dial(context.Background(), socket, "test"); err == nil {
			c.Close()
			up = true
		}
	}
	if !up {
		cmd.Process.Kill()
		t.Fatal("the server started no daemon in 20 s")
	}
	stdin.Close() // the editor goes
	if err := cmd.Wait(); err != nil {
		t.Errorf("the server: %v", err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		c, err := client.Dial(context.Background(), socket, "test")
		if err != nil {
			return // gone
		}
		c.Close()
	}
	t.Error("the daemon still answers 10 s after the editor went")
}
