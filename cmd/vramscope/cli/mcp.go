package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/vramscope/vramscope/cmd/vramscope/mcp"
	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/transport"
)

// mcpCmd serves the Model Context Protocol: on stdio by default (the
// assistant starts it), or on loopback HTTP with a token.
type mcpCmd struct {
	socket    string
	http      string
	tokenFile string
}

func runMCP(args []string, stdout, stderr io.Writer) int {
	var c mcpCmd
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "", "the daemon's socket, for stored snapshots and processes (default as vramscope serve); no daemon is started")
	fs.StringVar(&c.http, "http", "", "ADDR: serve streamable HTTP on a loopback address (127.0.0.1:PORT) at "+mcp.Path+" instead of stdio; requests need the token")
	fs.StringVar(&c.tokenFile, "token-file", "", "where --http writes its token (default <socket>.mcp.token, mode 0600)")
	if _, ok := parse(fs, args, stderr); !ok {
		return exitInput
	}
	if c.socket == "" {
		s, err := daemon.DefaultSocket()
		if err != nil {
			return fail(stderr, err)
		}
		c.socket = s
	}
	cfg := mcp.Config{Socket: c.socket, Version: version(), Logf: func(f string, a ...any) { fmt.Fprintf(stderr, "vramscope mcp: "+f+"\n", a...) }}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.http == "" {
		if err := mcp.RunStdio(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
			return fail(stderr, err)
		}
		return exitOK
	}
	return c.serveHTTP(ctx, cfg, stderr)
}

// serveHTTP listens on loopback only, writes a fresh token and serves until
// interrupted; the token file is removed on the way out.
func (c *mcpCmd) serveHTTP(ctx context.Context, cfg mcp.Config, stderr io.Writer) int {
	l, err := transport.ListenLoopback("--http", c.http)
	if err != nil {
		return fail(stderr, inputError{err})
	}
	if c.tokenFile == "" {
		c.tokenFile = c.socket + ".mcp.token"
	}
	tok, file, err := transport.WriteToken(c.tokenFile)
	if err != nil {
		l.Close()
		return fail(stderr, err)
	}
	defer file.Remove()
	srv := mcp.NewHTTPServer(mcp.HTTPHandler(cfg, tok))
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	cfg.Logf("serving http://%s%s (token in %s: send Authorization: Bearer TOKEN)", l.Addr(), mcp.Path, c.tokenFile)
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(stderr, err)
	}
	return exitOK
}
