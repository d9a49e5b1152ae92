package daemon

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// buildBinary builds cmd/vramscope once for the tests that run the daemon as
// a separate process.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "vsbin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "vramscope")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/vramscope").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func startServe(t *testing.T, bin, socket, data string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--socket", socket, "--data-dir", data, "--spool", "-", "--no-counters")
	log := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("daemon log:\n%s", log)
	})
	waitSocket(t, socket)
	return cmd
}

// TestKill9MidImport kills the daemon process while clients are importing
// snapshots, restarts it, and checks that every listed snapshot is complete
// (its SHA-256 matches) and analysable, and that no partial file is left.
func TestKill9MidImport(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	socket, data := filepath.Join(dir, "d.sock"), filepath.Join(dir, "data")
	for round, delay := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond, 900 * time.Millisecond} {
		cmd := startServe(t, bin, socket, data)
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := client.Dial(context.Background(), socket, "test")
				if err != nil {
					return
				}
				defer c.Close()
				for i := 0; i < 50; i++ {
					if c.Call(context.Background(), api.SnapshotImport, api.ImportParams{Path: mustAbs(fixtures + "oom_batch.pickle")}, nil) != nil {
						return // the daemon died under us: expected
					}
				}
			}()
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		wg.Wait()

		startServe(t, bin, socket, data)
		c := dial(t, socket)
		var list api.ListResult
		call(t, c, api.SnapshotList, nil, &list)
		t.Logf("round %d: %d snapshots survived a kill after %s", round, len(list.Snapshots), delay)
		for _, s := range list.Snapshots {
			if sum := fileSHA(t, s.Path); sum != s.SHA256 {
				t.Errorf("snapshot %s: sha %s, meta says %s", s.ID, sum, s.SHA256)
			}
		}
		if len(list.Snapshots) > 0 {
			var r analyze.Result
			call(t, c, api.AnalysisSummary, api.IDParams{ID: list.Snapshots[0].ID}, &r)
			if r.Peak.Bytes == 0 {
				t.Error("a surviving snapshot does not analyse")
			}
		}
		if left, _ := os.ReadDir(filepath.Join(data, "incoming")); len(left) != 0 {
			t.Errorf("incoming keeps %d files after restart", len(left))
		}
		c.Close()
		syscall.Kill(cmdPID(t, socket), syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond)
	}
}

func cmdPID(t *testing.T, socket string) int {
	c := dial(t, socket)
	var h api.StatusResult
	call(t, c, api.Status, nil, &h)
	c.Close()
	return h.PID
}

func fileSHA(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}

// TestDiskFull puts the store on a 600 KiB tmpfs: importing a bigger snapshot
// fails with a store error naming the cause, nothing is listed or left over,
// and a small import afterwards succeeds.
func TestDiskFull(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	d, cfg := testDaemon(t, func(c *Config) { c.DataDir = filepath.Join(mnt, "data") })
	c := dial(t, cfg.Socket)
	err := c.Call(context.Background(), api.SnapshotImport, api.ImportParams{Path: mustAbs(fixtures + "gpt2_train.pickle")}, nil)
	if client.Code(err) != api.CodeStoreFailed || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("import onto a full disk: %v", err)
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots listed", n)
	}
	if left, _ := os.ReadDir(d.store.IncomingDir()); len(left) != 0 {
		t.Errorf("incoming keeps %v", left)
	}
	var small api.SnapshotResult
	call(t, c, api.SnapshotImport, api.ImportParams{Path: mustAbs("../examples/snapshots/leak_steps.pickle")}, &small)
	if err := d.store.Verify(small.ID); err != nil {
		t.Error(err)
	}
}

// TestOtherUserRefused: with the socket opened up to everyone, a process of
// another user still gets refused by the peer-credential check.
func TestOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	if os.Getenv("VRAMSCOPE_HELPER_CONNECT") != "" {
		return
	}
	_, cfg := testDaemon(t)
	os.Chmod(filepath.Dir(cfg.Socket), 0o755)
	os.Chmod(cfg.Socket, 0o666)
	for p := filepath.Dir(cfg.Socket); p != "/" && p != "."; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	self, _ := os.Executable()
	bindir := t.TempDir()
	os.Chmod(bindir, 0o755)
	os.Chmod(filepath.Dir(bindir), 0o755)
	exe := filepath.Join(bindir, "helper.test")
	if err := copyFile(self, exe); err != nil {
		t.Fatal(err)
	}
	os.Chmod(exe, 0o755)
	cmd := exec.Command(exe, "-test.run=TestHelperConnect")
	cmd.Env = []string{"VRAMSCOPE_HELPER_CONNECT=" + cfg.Socket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid 65534: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-32001") || !strings.Contains(string(out), "another user") {
		t.Errorf("another user's connection got: %s", out)
	}
	dial(t, cfg.Socket) // the owner still gets in
}

// TestHelperConnect is the child of TestOtherUserRefused.
func TestHelperConnect(t *testing.T) {
	socket := os.Getenv("VRAMSCOPE_HELPER_CONNECT")
	if socket == "" {
		t.Skip("helper process only")
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"snapshot.list"}` + "\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	fmt.Printf("answer: %q %v\n", line, err)
}
