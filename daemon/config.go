package daemon

import (
	"errors"

	"fmt"
	"github.com/vramscope/vramscope/daemon/counters"
	"os"
	"path/filepath"
	"time"
)

// Config is the daemon's one typed configuration; Defaults fills what is unset.
type Config struct {
	Socket       string           // Unix socket path; default DefaultSocket()
	DataDir      string           // snapshot store; default DefaultDataDir()
	TCP          string           // optional loopback listener, e.g. "127.0.0.1:7425"; "" = none
	TokenFile    string           // where the TCP token is written; default beside the socket
	Interval     time.Duration    // NVML sampling interval; default 100 ms
	MaxSnapshots int              // retention by count; default 200
	MaxBytes     int64            // retention by bytes; default 20 GiB
	DumpTimeout  time.Duration    // how long an agent may take to dump; default 2 min
	Version      string           // the build, reported by daemon.hello
	NoCounters   bool             // do not start NVML sampling (tests)
	Sampler      counters.Sampler // sample this instead of NVML (tests, replays); nil = NVML
	Logf         func(format string, args ...any)
}

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
	if c.TokenFile == "" {
		c.TokenFile = filepath.Join(filepath.Dir(c.Socket), "token")
	}
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
