// Package daemontest runs a real daemon, and fake agents that speak its real
// protocol, for the tests of the layers above it (the CLI, the language
// server). Test support only: only test files import it.
package daemontest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/profiler/forecast"
)

// Daemon is a daemon serving on Socket (no NVML sampling) until Stop or the
// end of the test.
type Daemon struct {
	Socket, DataDir string
	srv             *daemon.Daemon
	stop            func()
}

// Start starts a daemon in a temporary folder of a short path (a Unix
// socket's path is limited) and waits until its socket exists.
func Start(t testing.TB) *Daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "vsd")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Socket: filepath.Join(dir, "d.sock"), DataDir: filepath.Join(dir, "data")}
	srv, err := daemon.New(daemon.Config{Socket: d.Socket, DataDir: d.DataDir, Spool: filepath.Join(dir, "spool"), NoCounters: true})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	d.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	var once sync.Once
	d.stop = func() { once.Do(func() { cancel(); <-served }) }
	t.Cleanup(func() { d.stop(); os.RemoveAll(dir) })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(d.Socket); err == nil {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon made no socket at %s in 10 s", d.Socket)
		}
	}
}

// Levels hands the daemon a process's per-step levels, as the agent's
// would arrive (the memory warning's tests).
func (d *Daemon) Levels(pid int, levels []forecast.Level, capBytes int64) {
	d.srv.ObserveLevels(pid, levels, capBytes)
}

// Leak is n levels of a run that keeps 1 MiB more each step, its peak from
// 1.5 GiB under a 4-step saw-tooth and 100 MiB of cache beyond it, a step
// every 70 ms: with a 3 GiB cap it is full near step 1,320, and the daemon
// warns from step 250 on (given 1,100 levels: full in about 15 s).
func Leak(n int) []forecast.Level {
	const mib = 1 << 20
	out := make([]forecast.Level, n)
	for i := range out {
		p := int64(1536*mib + i*mib + (i%4)*40*mib)
		out[i] = forecast.Level{Step: i, TimeS: 0.07 * float64(i), Allocated: int64(512*mib + i*mib), Reserved: p + 100*mib, Peak: p}
	}
	return out
}

// Stop stops the daemon and waits until it has (at most once).
func (d *Daemon) Stop() { d.stop() }

// Agent registers over socket as reg says and answers agent.dump with a copy
// of the snapshot file src, until the end of the test.
func Agent(t testing.TB, socket string, reg api.RegisterParams, src string) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		var p api.DumpParams
		if r.Params == nil || json.Unmarshal(*r.Params, &p) != nil {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "want agent.dump's params"}
		}
		n, err := copyFile(src, p.Path)
		return api.DumpResult{Path: p.Path, Bytes: n, Entries: 1, TookMS: 1}, err
	})
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(h))
	t.Cleanup(func() { conn.Close() })
	if reg.APIVersion == "" {
		reg.APIVersion = api.Version
	}
	if err := conn.Call(context.Background(), api.AgentRegister, reg, &api.RegisterResult{}); err != nil {
		t.Fatal(err)
	}
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// StackAgent registers over socket as reg says, sends first as one
// agent.stacks notification and waits until the daemon has it (it keeps the
// samples after the agent has gone); send sends more batches, as an agent
// does every second.
func StackAgent(t testing.TB, socket string, reg api.RegisterParams, first api.StacksParams) (send func(api.StacksParams) error) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.HandlerWithError(
		func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) { return nil, nil }))
	t.Cleanup(func() { conn.Close() })
	if reg.APIVersion == "" {
		reg.APIVersion = api.Version
	}
	ctx := context.Background()
	if err := conn.Call(ctx, api.AgentRegister, reg, &api.RegisterResult{}); err != nil {
		t.Fatal(err)
	}
	send = func(b api.StacksParams) error { return conn.Notify(ctx, api.AgentStacks, b) }
	if err := send(first); err != nil {
		t.Fatal(err)
	}
	// A notification has no answer (and the daemon handles messages
	// concurrently): ask idle.report until the samples are in.
	for deadline := time.Now().Add(10 * time.Second); conn.Call(ctx, api.IdleReport, api.IdleParams{PID: reg.PID}, &api.IdleResult{}) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon has no stack samples of process %d 10 s after agent.stacks", reg.PID)
		}
	}
	return send
}
