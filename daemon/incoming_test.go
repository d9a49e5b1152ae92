package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/internal/vsmtest"
)

// TestCapturedIncomingDirItself: agent.captured must name a regular *.part
// file inside the incoming directory. Given the directory itself, the daemon
// removed it once the analysis failed, and every later capture and import
// failed until a restart. The directory stays, and captures go on working.
func TestCapturedIncomingDirItself(t *testing.T) {
	d, cfg := testDaemon(t)
	ag := fakeAgent(t, cfg.Socket, 6161, nil)
	in := d.store.IncomingDir()
	captured := func(path string) {
		t.Helper()
		err := ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: path}, Reason: "oom"}, nil)
		var re *jsonrpc2.Error
		if !errors.As(err, &re) || re.Code != api.CodeInvalidParams && re.Code != api.CodeBadSnapshot {
			t.Errorf("captured %q: %v", path, err)
		}
		if fi, err := os.Stat(in); err != nil || !fi.IsDir() {
			t.Fatalf("after captured %q the incoming directory is gone: %v", path, err)
		}
	}
	for _, path := range []string{in, in + "/", in + "/."} { // while it is empty
		captured(path)
	}
	os.Mkdir(filepath.Join(in, "sub.part"), 0o700)
	outside := filepath.Join(t.TempDir(), "x.part")
	copyFile(fixtures+"oom_batch.pickle", outside)
	noSuffix := filepath.Join(in, "x.pickle")
	copyFile(fixtures+"oom_batch.pickle", noSuffix)
	link := filepath.Join(in, "link.part")
	os.Symlink(mustAbs(fixtures+"oom_batch.pickle"), link)
	for _, path := range []string{filepath.Dir(in), filepath.Join(in, "sub.part"), filepath.Join(in, "sub.part", ".."),
		outside, noSuffix, link, "x.part", filepath.Join(in, "missing.part")} {
		captured(path)
	}
	for _, p := range []string{outside, noSuffix, link, filepath.Join(in, "sub.part")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	part := filepath.Join(in, "6161-oom.part")
	if err := copyFile(fixtures+"oom_batch.pickle", part); err != nil {
		t.Fatal(err)
	}
	var res api.SnapshotResult
	if err := ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: part}, Reason: "oom"}, &res); err != nil {
		t.Fatalf("a good capture after the bad ones: %v", err)
	}
}

// TestCapturedFIFO: named pipes handed to agent.captured, many at once, are
// refused at once; each used to hold an OS thread for ever (10,100 pipelined
// imports ended the daemon with "thread exhaustion").
func TestCapturedFIFO(t *testing.T) {
	d, cfg := testDaemon(t)
	ag := fakeAgent(t, cfg.Socket, 6262, nil)
	c := dial(t, cfg.Socket)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 50; i++ {
		fifo := filepath.Join(d.store.IncomingDir(), fmt.Sprintf("6262-fifo-%d.part", i)) // as an agent names it
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("no FIFOs here: %v", err)
		}
		outside := filepath.Join(t.TempDir(), "snap.pickle")
		if err := syscall.Mkfifo(outside, 0o600); err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- ag.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: fifo}, Reason: "oom"}, nil)
		}()
		go func() {
			defer wg.Done()
			errs <- c.Call(context.Background(), api.SnapshotImport, api.ImportParams{Path: outside}, nil)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("FIFOs handed to agent.captured or snapshot.import still wait after 20 s")
	}
	close(errs)
	for err := range errs {
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("a FIFO: %v", err)
		}
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots stored", n)
	}
}

// TestStreamedTakeTimeout: an agent that answers it streams and then never
// opens the FIFO, or writes part of a snapshot and holds the FIFO open, held
// snapshot.take for ever, the FIFO left in incoming/. The timeout covers the
// stream; nothing is left behind.
func TestStreamedTakeTimeout(t *testing.T) {
	d, cfg := testDaemon(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	vsm := vsmOfFixture(t, fixtures+"gpt2_train.pickle")
	fakeAgent(t, cfg.Socket, 7171, func(_ *jsonrpc2.Conn, path string) (any, error) {
		return api.DumpResult{Path: path, Streamed: true}, nil // and never opens the FIFO
	})
	fakeAgent(t, cfg.Socket, 7272, func(_ *jsonrpc2.Conn, path string) (any, error) {
		w, err := os.OpenFile(path+".fifo", os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		go func() {
			defer w.Close()
			w.Write(vsm[:len(vsm)/2])
			<-release // holds the FIFO open
		}()
		return api.DumpResult{Path: path, Streamed: true}, nil
	})
	c := dial(t, cfg.Socket)
	for _, pid := range []int{7171, 7272} {
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			done <- c.Call(context.Background(), api.SnapshotTake, api.TakeParams{PID: pid, TimeoutMS: 300}, nil)
		}()
		select {
		case err := <-done:
			if client.Code(err) != api.CodeAgentFailed || !strings.Contains(err.Error(), "within 300ms") {
				t.Errorf("pid %d: %v", pid, err)
			}
			t.Logf("pid %d: %v after %s", pid, err, time.Since(start).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			t.Fatalf("pid %d: snapshot.take with a 300 ms timeout still waits after 20 s", pid)
		}
		if left, _ := os.ReadDir(d.store.IncomingDir()); len(left) != 0 {
			t.Errorf("pid %d: incoming keeps %v", pid, left)
		}
	}
	if n := len(d.store.List()); n != 0 {
		t.Errorf("%d snapshots stored", n)
	}
}

// TestCapturedOnlyOwnFiles: agent.captured may not name a file the daemon
// is writing for another client (an import being copied, named as
// NewIncoming names it: committing it deleted it under the importer) nor
// another process's OOM capture; both stay where they are, and their owner
// hands its own over.
func TestCapturedOnlyOwnFiles(t *testing.T) {
	d, cfg := testDaemon(t)
	thief := fakeAgent(t, cfg.Socket, 5001, nil)
	owner := fakeAgent(t, cfg.Socket, 5002, nil)
	staging := d.store.NewIncoming("import")
	theirs := filepath.Join(d.store.IncomingDir(), "oom-5002-1764672000000-1.part")
	for _, p := range []string{staging, theirs} {
		if err := copyFile(fixtures+"oom_batch.pickle", p); err != nil {
			t.Fatal(err)
		}
		err := thief.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: p}, Reason: "oom"}, nil)
		var je *jsonrpc2.Error
		if !errors.As(err, &je) || je.Code != api.CodeInvalidParams {
			t.Errorf("%s handed over by another agent: %v", filepath.Base(p), err)
		}
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
	var res api.SnapshotResult
	if err := owner.Call(context.Background(), api.AgentCaptured, api.CapturedParams{DumpResult: api.DumpResult{Path: theirs}, Reason: "oom"}, &res); err != nil || res.PID != 5002 {
		t.Fatalf("the owner's own capture: %v %+v", err, res)
	}
	if n := len(d.store.List()); n != 1 {
		t.Errorf("%d snapshots stored, want the owner's one", n)
	}
}

// vsmOfFixture is a real snapshot written as VSM1 by the agent's own writer,
// in chunks as small as the agent's.
func vsmOfFixture(t *testing.T, pickle string) []byte {
	return vsmtest.Bytes(t, mustAbs("../jupyter"), pickle, 512)
}
