// Package client is the Go client of the daemon's JSON-RPC API (daemon/api):
// the CLI, the language server and the tests talk to the daemon through it.
// It can start a daemon when none answers.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
)

// Client is one connection to the daemon.
type Client struct {
	conn   *jsonrpc2.Conn
	Notify func(method string, params json.RawMessage) // called for event.* notifications; set before subscribing
	seq    atomic.Uint64                               // request ids, "c1", "c2", … (Call)
}

// Dial connects to the daemon's Unix socket and says hello.
func Dial(ctx context.Context, socket, name string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("no vramscope daemon at %s: %w", socket, err)
	}
	return handshake(ctx, c, name, "")
}

// DialTCP connects to a daemon's loopback TCP listener with its token.
func DialTCP(ctx context.Context, addr, token, name string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("no vramscope daemon at %s: %w", addr, err)
	}
	return handshake(ctx, c, name, token)
}

func handshake(ctx context.Context, c net.Conn, name, token string) (*Client, error) {
	cl := &Client{}
	h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		if r.Notif && cl.Notify != nil && r.Params != nil {
			cl.Notify(r.Method, *r.Params)
		}
		if !r.Notif {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "a client answers no requests"}
		}
		return nil, nil
	})
	cl.conn = jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), h, jsonrpc2.SetLogger(quiet{}))
	var hr api.HelloResult
	if err := cl.Call(ctx, api.Hello, api.HelloParams{Client: name, APIVersion: api.Version, Token: token}, &hr); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// Call sends one request and decodes its result into result (which may be nil).
//
// When ctx ends before the answer, Call tells the daemon ($/cancelRequest) so
// that it stops the work nobody waits for (an analysis stops decoding).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	id := jsonrpc2.ID{Str: fmt.Sprintf("c%d", c.seq.Add(1)), IsString: true}
	err := c.conn.Call(ctx, method, params, result, jsonrpc2.PickID(id))
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		c.cancel(id)
	}
	var re *jsonrpc2.Error
	if errors.As(err, &re) {
		return &Error{Code: re.Code, Message: re.Message, Method: method}
	}
	return err
}

// cancel sends $/cancelRequest for id, waiting at most a second for the
// socket (a daemon that does not read is no reason to hang the caller).
func (c *Client) cancel(id jsonrpc2.ID) {
	ctx, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	_ = c.conn.Notify(ctx, api.CancelRequest, api.CancelParams{ID: id})
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.conn.DisconnectNotify() }

// Error is an error the daemon answered with.
type Error struct {
	Code    int64
	Message string
	Method  string
}

func (e *Error) Error() string { return e.Message }

// Code returns the daemon's error code of err, or 0.
func Code(err error) int64 {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// Ensure connects to the daemon at socket, starting `exe serve` in the
// background (detached, its log in logFile) when none answers, and waiting
// up to wait for it to come up.
func Ensure(ctx context.Context, socket, name, exe string, serveArgs []string, logFile string, wait time.Duration) (*Client, bool, error) {
	if c, err := Dial(ctx, socket, name); err == nil {
		return c, false, nil
	}
	args := append([]string{"serve", "--socket", socket}, serveArgs...)
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if logFile != "" {
		if f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			cmd.Stdout, cmd.Stderr = f, f
			defer f.Close()
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("starting the daemon (%s %s): %w", exe, strings.Join(args, " "), err)
	}
	go cmd.Wait() // reap it if it exits early
	deadline := time.Now().Add(wait)
	for {
		c, err := Dial(ctx, socket, name)
		if err == nil {
			return c, true, nil
		}
		if time.Now().After(deadline) {
			return nil, true, fmt.Errorf("started the daemon but it did not answer on %s within %s (see %s)", socket, wait, logFile)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quiet drops jsonrpc2's own log lines (a closed connection is reported to
// the caller as an error already).
type quiet struct{}

func (quiet) Printf(string, ...any) {}
