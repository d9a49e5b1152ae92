package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// backend answers the tools: snapshot files are analysed here (the last few
// results kept), stored snapshots and processes are the daemon's.
type backend struct {
	cfg Config

	mu    sync.Mutex
	cache []cached // most recent last
}

// cached is one file's analysis, valid while the file's size and time stay.
type cached struct {
	path  string
	size  int64
	mtime time.Time
	res   *analyze.Result
}

// keepAnalyses bounds the cache: an analysis of a large snapshot holds
// hundreds of MiB, and an assistant asks about one or two files at a time.
const keepAnalyses = 4

func newBackend(cfg Config) *backend { return &backend{cfg: cfg} }

// isFile says whether src names a snapshot file (else it is a stored id).
func isFile(src string) bool {
	fi, err := os.Stat(src)
	return err == nil && fi.Mode().IsRegular()
}

// looksLikePath tells a file that is not there from a stored id (ids such
// as 20261129T110203.123Z-0001 have a dot but no separator).
func looksLikePath(src string) bool {
	switch strings.ToLower(filepath.Ext(src)) {
	case ".pickle", ".pkl", ".vsm", ".pt", ".json":
		return true
	}
	return strings.ContainsRune(src, '/')
}

// analysis is the result for a file or a stored snapshot's id.
func (b *backend) analysis(ctx context.Context, src string) (*analyze.Result, error) {
	if src == "" {
		return nil, errors.New("name a snapshot: a file path or a stored snapshot's id (list_snapshots)")
	}
	if isFile(src) {
		return b.file(ctx, src)
	}
	if looksLikePath(src) {
		return nil, fmt.Errorf("%s: no such snapshot file", src)
	}
	var res analyze.Result
	if err := b.call(ctx, api.AnalysisSummary, api.IDParams{ID: src}, &res); err != nil {
		return nil, fmt.Errorf("stored snapshot %s: %w", src, err)
	}
	return &res, nil
}

// file analyses a snapshot file, or returns the analysis kept for it.
func (b *backend) file(ctx context.Context, path string) (*analyze.Result, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if res := b.lookup(abs, fi); res != nil {
		return res, nil
	}
	res, err := analyze.RunContext(ctx, abs, analyze.Options{})
	if err != nil {
		return nil, err
	}
	b.keep(cached{abs, fi.Size(), fi.ModTime(), res})
	return res, nil
}

func (b *backend) lookup(abs string, fi fs.FileInfo) *analyze.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.cache {
		if c.path == abs && c.size == fi.Size() && c.mtime.Equal(fi.ModTime()) {
			return c.res
		}
	}
	return nil
}

func (b *backend) keep(c cached) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.cache[:0]
	for _, old := range b.cache {
		if old.path != c.path {
			kept = append(kept, old)
		}
	}
	b.cache = append(kept, c)
	if len(b.cache) > keepAnalyses {
		b.cache = b.cache[len(b.cache)-keepAnalyses:]
	}
}

// call dials the daemon, calls one method and hangs up. It never starts a
// daemon: an assistant asking a question should not leave one running.
func (b *backend) call(ctx context.Context, method string, params, result any) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, err := client.Dial(dctx, b.cfg.Socket, "mcp")
	cancel()
	if err != nil {
		return noDaemon(b.cfg.Socket, err)
	}
	defer c.Close()
	return c.Call(ctx, method, params, result)
}

// noDaemon says that no daemon runs, and what to do, when that is the
// problem; other failures keep their own words.
func noDaemon(socket string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no vramscope daemon runs at %s: start one with `vramscope serve` (and run training under `vramscope run`), or analyse a snapshot file by its path", socket)
	}
	return err
}
