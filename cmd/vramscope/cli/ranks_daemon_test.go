package cli_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/daemontest"
)

// agentOf registers as rank `rank` of launch run and answers agent.dump with
// a copy of src.
func agentOf(t *testing.T, socket, run string, pid, rank int, src string) {
	daemontest.Agent(t, socket, api.RegisterParams{PID: pid, Host: "test", Rank: rank, LocalRank: rank, WorldSize: 2,
		Argv: []string{"python", "train.py"}, Recording: true, JobFacts: api.JobFacts{RunID: run}}, src)
}

// TestSnapJobAndRanksOfAGroup: `snap PID --job` through a daemon with two
// ranks of one launch (the whatif recordings at batch 4 and 8 stand in for
// them), then `ranks GROUP` of what it stored.
func TestSnapJobAndRanksOfAGroup(t *testing.T) {
	socket := daemontest.Start(t).Socket
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
