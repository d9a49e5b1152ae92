package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/daemon/export"
	"github.com/vramscope/vramscope/daemon/kube"
	"github.com/vramscope/vramscope/daemon/transport"
)

// Config is the daemon's one typed configuration; Defaults fills what is unset.
type Config struct {
	Socket       string           // Unix socket path; default DefaultSocket()
	DataDir      string           // snapshot store; default DefaultDataDir()
	Spool        string           // the agents' spool of OOM snapshots, imported once their process exits; default DefaultSpoolDir(); "-" none
	TCP          string           // optional loopback listener, e.g. "127.0.0.1:7425"; "" = none
	TokenFile    string           // where the TCP token is written; default <Socket>.token
	TCPLimits    TCPLimits        // what TCP peers may hold; zero fields take the defaults
	Interval     time.Duration    // NVML sampling interval; default 100 ms
	MaxSnapshots int              // retention by count; default 200
	MaxBytes     int64            // retention by bytes; default 20 GiB
	DumpTimeout  time.Duration    // how long an agent may take to dump; default 2 min
	Version      string           // the build, reported by daemon.hello
	NoCounters   bool             // do not start NVML sampling (tests)
	Sampler      counters.Sampler // sample this instead of NVML (tests, replays); nil = NVML
	Export       Export           // Prometheus metrics and pprof profiles over HTTP; off by default
	Kube         Kube             // pod names from the kubelet; off by default
	Logf         func(format string, args ...any)
}

// Export is the HTTP listener for Prometheus and pprof tools (see
// export.Config).
type Export = export.Config

// Kube says where the kubelet's pod list is. Without it processes in pods
// still get their pod UID and container ID from /proc/PID/cgroup.
type Kube struct {
	KubeletURL string // e.g. "https://10.0.0.5:10250/pods"; "" = names unknown
	TokenFile  string // bearer token (a service account's)
	CAFile     string // the kubelet's CA; "" = system roots
	Insecure   bool   // do not verify the kubelet's certificate
	// ReadCgroup reads a process's pod and container; nil reads
	// /proc/PID/cgroup (tests give processes pods).
	ReadCgroup func(pid int) (kube.Ref, error)
}

// TCPLimits bound the connections of the loopback TCP listener (see
// transport.Limits).
type TCPLimits = transport.Limits

// DefaultTCPLimits are the limits a zero TCPLimits field takes.
var DefaultTCPLimits = transport.DefaultLimits

// RuntimeDir is the per-user directory of the socket and token:
// $XDG_RUNTIME_DIR/vramscope, else <user cache dir>/vramscope.
func RuntimeDir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "vramscope"), nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no runtime directory: set XDG_RUNTIME_DIR or HOME (%v)", err)
	}
	return filepath.Join(c, "vramscope"), nil
}

// DefaultSocket is the socket clients and agents find without configuration;
// $VRAMSCOPE_SOCKET overrides it.
func DefaultSocket() (string, error) {
	if s := os.Getenv("VRAMSCOPE_SOCKET"); s != "" {
		return s, nil
	}
	d, err := RuntimeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "daemon.sock"), nil
}

// DefaultDataDir is $XDG_STATE_HOME/vramscope, else ~/.local/state/vramscope.
func DefaultDataDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "vramscope"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("no data directory: set XDG_STATE_HOME or HOME, or pass --data-dir")
	}
	return filepath.Join(home, ".local", "state", "vramscope"), nil
}

func (c *Config) defaults() error {
	if c.MaxSnapshots < 0 {
		return fmt.Errorf("the snapshot count limit is %d; it must be positive (0 for the default)", c.MaxSnapshots)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("the snapshot byte limit is %d; it must be positive (0 for the default)", c.MaxBytes)
	}
	var err error
	if c.Socket == "" {
		if c.Socket, err = DefaultSocket(); err != nil {
			return err
		}
	}
	if c.DataDir == "" {
		if c.DataDir, err = DefaultDataDir(); err != nil {
			return err
		}
	}
	switch c.Spool {
	case "":
		c.Spool = DefaultSpoolDir()
	case "-":
		c.Spool = ""
	}
	if c.TokenFile == "" {
		c.TokenFile = c.Socket + ".token" // named after the socket: never a file some other program calls "token"
	}
	c.TCPLimits.Defaults()
	if c.Interval <= 0 {
		c.Interval = 100 * time.Millisecond
	}
	if c.DumpTimeout <= 0 {
		c.DumpTimeout = 2 * time.Minute
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}
