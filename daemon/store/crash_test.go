//go:build unix

package store

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash tests run this test binary again as a child (TestHelperProcess)
// that opens the store and commits snapshots in a loop, and SIGKILL it. The
// child is told what to do through these environment variables and reports on
// stdout, one line each: "writing N" (snapshot N's .part file exists and its
// first chunk is written), "committed ID", "paused STEP", "error ...".
const (
	envDir   = "VRAMSCOPE_STORE_HELPER_DIR"
	envMode  = "VRAMSCOPE_STORE_HELPER_MODE"  // slow, fast or pause
	envPause = "VRAMSCOPE_STORE_HELPER_PAUSE" // the Commit step to stop at in mode pause
)

// Mode slow: 4 MiB per snapshot in 128 reads of 32 KiB with 1 ms before each,
// so that a snapshot takes more than 128 ms to write.
const (
	slowSize  = 4 << 20
	slowChunk = 32 << 10
	slowSleep = time.Millisecond
)

// slowReader yields size pseudo-random bytes in reads of at most chunk bytes,
// sleeping before each, and calls onSecondRead when the second read starts: by
// then Import has created the .part file and written the first chunk to it.
type slowReader struct {
	rng          *rand.ChaCha8
	left, chunk  int
	sleep        time.Duration
	reads        int
	onSecondRead func()
}

func (r *slowReader) Read(p []byte) (int, error) {
	r.reads++
	if r.reads == 2 && r.onSecondRead != nil {
		r.onSecondRead()
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.sleep)
	n := min(len(p), r.chunk, r.left)
	r.rng.Read(p[:n])
	r.left -= n
	return n, nil
}

func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(envDir)
	if dir == "" {
		return // not the child of a crash test
	}
	s, err := Open(dir, Limits{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	mode, pause := os.Getenv(envMode), os.Getenv(envPause)
	committed := 0
	if mode == "pause" {
		testHook = func(step, path string) error {
			if step == pause && committed == 2 {
				fmt.Println("paused", step, path)
				time.Sleep(time.Hour)
			}
			return nil
		}
	}
	for n := 0; ; n++ {
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], uint64(os.Getpid()))
		binary.LittleEndian.PutUint64(seed[8:], uint64(n))
		r := &slowReader{rng: rand.NewChaCha8(seed), left: slowSize, chunk: slowChunk, sleep: slowSleep,
			onSecondRead: func() { fmt.Println("writing", n) }}
		switch mode {
		case "fast":
			r.left, r.chunk, r.sleep = (1+n%3)<<20, 256<<10, 0
		case "pause":
			r.left, r.chunk, r.sleep = 256<<10, 256<<10, 0
		}
		m, err := s.importFrom(r, "helper", Meta{Reason: "request", PID: os.Getpid()})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		committed++
		fmt.Println("committed", m.ID)
	}
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
	seen  []string
	once  sync.Once
}

func startChild(t *testing.T, dir, mode, pause string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envDir+"="+dir, envMode+"="+mode, envPause+"="+pause)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// waitFor reads the child's lines until one equal to want (or starting with
// it followed by a space).
func (c *child) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before %q; it said %q", want, c.seen)
			}
			c.seen = append(c.seen, l)
			if strings.HasPrefix(l, "error") {
				t.Fatalf("child: %s", l)
			}
			if l == want || strings.HasPrefix(l, want+" ") {
				return
			}
		case <-timeout:
			c.kill()
			t.Fatalf("child did not say %q within a minute; it said %q", want, c.seen)
		}
	}
}

// kill sends SIGKILL, reads what the child wrote before dying and reaps it.
func (c *child) kill() {
	c.once.Do(func() {
		c.cmd.Process.Kill() // SIGKILL on Unix
		for l := range c.lines {
			c.seen = append(c.seen, l)
		}
		c.cmd.Wait()
	})
}

func (c *child) committed() int {
	n := 0
	for _, l := range c.seen {
		if strings.HasPrefix(l, "committed ") {
			n++
		}
	}
	return n
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkAfterCrash opens dir and checks that exactly want snapshots are listed,
// every one verifies, and the directories hold nothing else.
func checkAfterCrash(t *testing.T, dir string, want int) *Store {
	t.Helper()
	s, err := Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	list := s.List()
	if len(list) != want {
		t.Errorf("%d snapshots listed after the crash, want %d (recovered: %q)", len(list), want, s.Recovered())
	}
	var files []string
	for _, m := range list {
		if err := s.Verify(m.ID); err != nil {
			t.Errorf("after the crash: %v", err)
		}
		files = append(files, m.ID+".json", m.ID+".pickle")
	}
	slices.Sort(files)
	if got := names(t, filepath.Join(dir, "snapshots")); !slices.Equal(got, files) {
		t.Errorf("snapshots/ holds %q, want %q", got, files)
	}
	if got := names(t, filepath.Join(dir, "incoming")); len(got) != 0 {
		t.Errorf("incoming/ still holds %q", got)
	}
	return s
}

// TestKillMidWrite SIGKILLs a child while it writes a snapshot's .part file.
// The child says "writing N" once the .part exists and holds its first chunk;
// the rest takes at least 127 more reads of 1 ms each, so a kill sent at most
// 45 ms later lands in the middle of the write, which the test confirms by
// finding a partial .part before reopening. Rounds share one directory, so
// each reopen also sees the snapshots (and the ID counter) of earlier rounds.
func TestKillMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	total := 0
	for round, delay := range []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond, 30 * time.Millisecond, 45 * time.Millisecond} {
		k := 1 + round%3 // kill while writing the (k+1)th snapshot, after k commits
		c := startChild(t, dir, "slow", "")
		c.waitFor(t, fmt.Sprint("writing ", k))
		time.Sleep(delay)
		c.kill()
		if got := c.committed(); got != k {
			t.Fatalf("round %d: child committed %d, want %d (the kill did not land in the write): %q", round, got, k, c.seen)
		}
		parts := glob(t, filepath.Join(dir, "incoming", "*.part"))
		if len(parts) != 1 {
			t.Fatalf("round %d: %d .part files after the kill, want 1", round, len(parts))
		}
		fi, err := os.Stat(parts[0])
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < slowChunk || fi.Size() >= slowSize {
			t.Fatalf("round %d: the .part has %d bytes: not killed mid-write", round, fi.Size())
		}
		t.Logf("round %d: killed %v after the write began, with %d of %d bytes written", round, delay, fi.Size(), slowSize)
		total += k
		s := checkAfterCrash(t, dir, total)
		if !strings.Contains(strings.Join(s.Recovered(), "\n"), parts[0]) {
			t.Errorf("Recovered does not name %s: %q", parts[0], s.Recovered())
		}
		s.Close()
	}
}

// TestKillMidCommit stops the child inside Commit, at each step between moving
// the pickle into place and syncing the directory, and SIGKILLs it there.
// Before the meta file's rename the snapshot must vanish at reopen; after it,
// it must be listed and verify.
func TestKillMidCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, c := range []struct {
		step      string
		committed bool // whether the commit point was passed
	}{
		{"write-meta", false},
		{"sync-meta", false},
		{"rename-meta", false},
		{"sync-dir", true},
	} {
		t.Run(c.step, func(t *testing.T) {
			dir := t.TempDir()
			ch := startChild(t, dir, "pause", c.step)
			ch.waitFor(t, "paused "+c.step)
			ch.kill()
			if ch.committed() != 2 {
				t.Fatalf("child committed %d before pausing, want 2", ch.committed())
			}
			pickles := glob(t, filepath.Join(dir, "snapshots", "*.pickle"))
			metas := glob(t, filepath.Join(dir, "snapshots", "*.json"))
			if len(pickles) != 3 || len(metas) != map[bool]int{false: 2, true: 3}[c.committed] {
				t.Fatalf("after the kill: pickles %q, metas %q", pickles, metas)
			}
			if tmps := glob(t, filepath.Join(dir, "snapshots", ".tmp-*")); len(tmps) != map[bool]int{false: 1, true: 0}[c.committed] {
				t.Fatalf("after the kill: temporary files %q", tmps)
			}
			want := 2
			if c.committed {
				want = 3
			}
			s := checkAfterCrash(t, dir, want)
			if !c.committed && !strings.Contains(strings.Join(s.Recovered(), "\n"), pickles[2]) {
				t.Errorf("Recovered does not name the uncommitted %s: %q", pickles[2], s.Recovered())
			}
		})
	}
}

// TestKillAnywhere SIGKILLs a child committing 1-3 MiB snapshots as fast as it
// can, after various delays, so the kill lands wherever it lands. One or zero
// snapshots may be committed without the child having said so.
func TestKillAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	total := 0
	for _, delay := range []time.Duration{3, 17, 40, 75, 130, 210} {
		c := startChild(t, dir, "fast", "")
		c.waitFor(t, "writing 0")
		time.Sleep(delay * time.Millisecond)
		c.kill()
		s, err := Open(dir, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		n := len(s.List())
		s.Close()
		if n != total+c.committed() && n != total+c.committed()+1 {
			t.Fatalf("%d listed, want %d or one more", n, total+c.committed())
		}
		checkAfterCrash(t, dir, n).Close()
		t.Logf("killed after %d ms: %d committed (%d said)", delay, n-total, c.committed())
		total = n
	}
}
