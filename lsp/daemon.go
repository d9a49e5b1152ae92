package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler"
)

// daemonLink is the server's connection to the daemon, kept up in the
// background: the editor works offline while there is none.
type daemonLink struct {
	mu     sync.Mutex
	c      *client.Client
	reason string // why there is no connection
	closed bool
	tried  chan struct{} // closed after the first attempt to connect
}

func (s *Server) link() *daemonLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.daemon
}

// errNoDaemon says the daemon cannot be reached, and why.
var errNoDaemon = errors.New("the vramscope daemon is not running")

func (d *daemonLink) get() (*client.Client, error) {
	if d == nil {
		return nil, errNoDaemon
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		if d.reason != "" {
			return nil, errors.New(errNoDaemon.Error() + ": " + d.reason)
		}
		return nil, errNoDaemon
	}
	return d.c, nil
}

func (d *daemonLink) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.c != nil {
		d.c.Close()
	}
}

// connectDaemon connects (starting a daemon in "auto" mode), follows new
// snapshots, and reconnects after the daemon goes away.
func (s *Server) connectDaemon() {
	s.mu.Lock()
	d := s.daemon
	if d == nil {
		d = &daemonLink{tried: make(chan struct{})}
		s.daemon = d
	}
	s.mu.Unlock()
	socket := s.cfg.Socket
	var once sync.Once
	defer once.Do(func() { close(d.tried) })
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		d.mu.Lock()
		closed := d.closed
		d.mu.Unlock()
		if closed {
			return
		}
		c, err := s.dial(socket)
		if err != nil {
			d.mu.Lock()
			d.reason = err.Error()
			d.mu.Unlock()
			once.Do(func() { close(d.tried) })
			time.Sleep(wait)
			continue
		}
		wait = time.Second
		c.Notify = s.onDaemonEvent
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.Call(ctx, api.Subscribe, api.SubscribeParams{Topics: []string{"snapshot_stored", "oom_captured", "memory_warning"}}, nil)
		cancel()
		d.mu.Lock()
		d.c, d.reason = c, ""
		d.mu.Unlock()
		once.Do(func() { close(d.tried) })
		<-c.Done()
		d.mu.Lock()
		d.c, d.reason = nil, "the connection closed"
		d.mu.Unlock()
	}
}

func (s *Server) dial(socket string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if s.cfg.Daemon == "auto" && s.cfg.Exe != "" {
		// A daemon this server starts stops once the server has exited: it
		// must not outlive the editor (one that runs already is left alone).
		exitWith := []string{"--exit-with", strconv.Itoa(os.Getpid())}
		c, _, err := client.Ensure(ctx, socket, "lsp", s.cfg.Exe, exitWith, filepath.Join(filepath.Dir(socket), "daemon.log"), 10*time.Second)
		return c, err
	}
	return client.Dial(ctx, socket, "lsp")
}

// onDaemonEvent shows each snapshot the daemon stores, when so configured.
func (s *Server) onDaemonEvent(method string, params json.RawMessage) {
	var snap api.SnapshotResult
	switch method {
	case api.EventSnapshotStored:
		json.Unmarshal(params, &snap)
	case api.EventOOMCaptured:
		var ev api.OOMEvent
		json.Unmarshal(params, &ev)
		snap = ev.Snapshot
		s.showMessage(msgWarning, oomMessage(ev))
	case api.EventMemoryWarning:
		var ev api.MemoryWarning
		json.Unmarshal(params, &ev)
		s.onMemoryWarning(ev)
		return
	default:
		return
	}
	if snap.Path != "" && s.currentSettings().FollowNewSnapshots {
		n := s.nextShow(snap.Path)
		go s.openAndShowAsked(s.lifeContext(), snap.Path, n)
	}
}

// oomMessage says who ran out and, as far as the agent named it, what
// filled the device.
func oomMessage(ev api.OOMEvent) string {
	msg := "vramscope: out of memory in pid " + itoa(ev.Snapshot.PID) + "; snapshot " + ev.Snapshot.ID + " captured"
	if len(ev.Named) == 0 {
		return msg
	}
	var parts []string
	for i, g := range ev.Named {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", profiler.FormatBytes(g.Bytes), strings.ReplaceAll(g.Kind, "_", " "), g.Name))
	}
	return fmt.Sprintf("%s. Filled by: %s; %.0f%% of it named", msg, strings.Join(parts, ", "), 100*ev.NamedShare)
}
