package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon"
	"github.com/vramscope/vramscope/daemon/api"
)

// agentOf registers over socket as rank `rank` of launch run and answers
// agent.dump with a copy of src.
func agentOf(t *testing.T, socket, run string, pid, rank int, src string) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		var p api.DumpParams
		json.Unmarshal(*r.Params, &p)
		in, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		out, err := os.Create(p.Path)
		if err != nil {
			return nil, err
		}
		n, err := io.Copy(out, in)
		out.Close()
		return api.DumpResult{Path: p.Path, Bytes: n, Entries: 1, TookMS: 1}, err
	})
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.AsyncHandler(h))
	t.Cleanup(func() { conn.Close() })
	reg := api.RegisterParams{PID: pid, Host: "test", Rank: rank, LocalRank: rank, WorldSize: 2, Argv: []string{"python", "train.py"},
		Recording: true, APIVersion: api.Version, JobFacts: api.JobFacts{RunID: run}}
	if err := conn.Call(context.Background(), api.AgentRegister, reg, &api.RegisterResult{}); err != nil {
		t.Fatal(err)
	}
}

// TestSnapJobAndRanksOfAGroup: `snap PID --job` through a daemon with two
// ranks of one launch (the whatif recordings at batch 4 and 8 stand in for
// them), then `ranks GROUP` of what it stored.
func TestSnapJobAndRanksOfAGroup(t *testing.T) {
	dir, _ := os.MkdirTemp("", "vscli")
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "d.sock")
	d, err := daemon.New(daemon.Config{Socket: socket, DataDir: filepath.Join(dir, "data"), NoCounters: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { d.Serve(ctx); close(served) }()
	defer func() { stop(); <-served }()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for rank, bs := range []string{"4", "8"} {
		agentOf(t, socket, "clijob", 9100+rank, rank, abs(t, need(t, filepath.Join(exampleDir, "whatif", "whatif_bs"+bs+".pickle"))))
	}
	o := mustRun(t, "snap", "9101", "--job", "--socket", socket)
	m := regexp.MustCompile(`^group (job-\S+) \(run:clijob\): 2 ranks, skew [0-9.]+ ms\n`).FindStringSubmatch(o.stdout)
	if m == nil || strings.Count(o.stdout, "  rank ") != 2 || !strings.Contains(o.stdout, "compare them: vramscope ranks "+m[1]) {
		t.Fatalf("snap --job:\n%s", o.stdout)
	}
	o = mustRun(t, "ranks", m[1], "--socket", socket)
	if !strings.HasPrefix(o.stdout, "2 ranks; median rank 0") || !strings.Contains(o.stdout, "rank 1 against the median rank 0: peak +") {
		t.Errorf("ranks %s:\n%s", m[1], o.stdout)
	}
	var rv struct {
		MaxRank int `json:"max_rank"`
	}
	o = mustRun(t, "ranks", m[1], "--socket", socket, "--json")
	if json.Unmarshal([]byte(o.stdout), &rv) != nil || rv.MaxRank != 1 {
		t.Errorf("ranks --json: %s", o.stdout)
	}
	if o := run("ranks", "job-20991231T000000.000Z-0001", "--socket", socket); o.code == 0 || !strings.Contains(o.stderr, "no group") {
		t.Errorf("ranks of no group: %v", o)
	}
}
