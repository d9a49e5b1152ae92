package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func open(t *testing.T, dir string, lim Limits) *Store {
	t.Helper()
	s, err := Open(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writePart writes data to a fresh .part file in s's incoming directory.
func writePart(t *testing.T, s *Store, data []byte) string {
	t.Helper()
	p := s.NewIncoming("test")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func commit(t *testing.T, s *Store, data []byte, m Meta) Meta {
	t.Helper()
	got, err := s.Commit(writePart(t, s, data), m)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sha(data []byte) string { h := sha256.Sum256(data); return hex.EncodeToString(h[:]) }

func ids(ms []Meta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// names lists the directory's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := open(t, dir, Limits{})
	for _, d := range []string{dir, s.IncomingDir(), filepath.Join(dir, "snapshots"), filepath.Join(dir, "cache")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	if s.Dir() != dir || s.IncomingDir() != filepath.Join(dir, "incoming") {
		t.Fatalf("Dir %q IncomingDir %q", s.Dir(), s.IncomingDir())
	}
	if len(s.Recovered()) != 0 {
		t.Errorf("fresh store recovered %v", s.Recovered())
	}

	var removed []string
	s.OnRemove(func(id string) { removed = append(removed, id) })

	var metas []Meta
	datas := map[string][]byte{}
	for i := range 3 {
		data := bytes.Repeat([]byte{byte('a' + i)}, 1000+i)
		part := writePart(t, s, data)
		m, err := s.Commit(part, Meta{Reason: "request", PID: 42, Rank: i, Label: fmt.Sprint("n", i)})
		if err != nil {
			t.Fatal(err)
		}
		if !ValidID(m.ID) || m.Bytes != int64(len(data)) || m.SHA256 != sha(data) || m.Created.IsZero() ||
			m.Reason != "request" || m.PID != 42 || m.Rank != i {
			t.Fatalf("commit returned %+v", m)
		}
		if exists(part) {
			t.Errorf("%s still exists after commit", part)
		}
		got, err := os.ReadFile(s.Path(m.ID))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("pickle %s: %v", s.Path(m.ID), err)
		}
		if !exists(filepath.Join(dir, "snapshots", m.ID+".json")) {
			t.Fatalf("no meta file for %s", m.ID)
		}
		if err := s.Verify(m.ID); err != nil {
			t.Fatal(err)
		}
		metas = append(metas, m)
		datas[m.ID] = data
	}
	if !slices.IsSorted(ids(metas)) || metas[0].ID == metas[1].ID || metas[1].ID == metas[2].ID {
		t.Fatalf("IDs do not sort by creation: %v", ids(metas))
	}
	for i := 1; i < 3; i++ {
		if metas[i].Created.Before(metas[i-1].Created) {
			t.Errorf("Created goes backwards: %v", metas)
		}
	}
	want := []Meta{metas[2], metas[1], metas[0]}
	if got := s.List(); !slices.Equal(got, want) {
		t.Fatalf("List = %v, want newest first %v", ids(got), ids(want))
	}
	if m, ok := s.Get(metas[1].ID); !ok || m != metas[1] {
		t.Fatalf("Get = %+v %v", m, ok)
	}
	if _, ok := s.Get("20990101T000000.000Z-0001"); ok {
		t.Fatal("Get of a missing ID succeeded")
	}

	// Cache.
	if err := s.WriteCache(metas[0].ID, "summary.json", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCache(metas[0].ID, "summary.json", []byte(`{"x":2}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadCache(metas[0].ID, "summary.json"); err != nil || string(got) != `{"x":2}` {
		t.Fatalf("ReadCache = %q, %v", got, err)
	}
	if _, err := s.ReadCache(metas[0].ID, "other.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadCache of a missing name: %v", err)
	}
	if err := s.WriteCache("20990101T000000.000Z-0001", "x", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("WriteCache for a missing snapshot: %v", err)
	}
	if _, err := s.ReadCache("20990101T000000.000Z-0001", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadCache for a missing snapshot: %v", err)
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", ".tmp-x", ".hidden"} {
		if err := s.WriteCache(metas[0].ID, bad, nil); err == nil {
			t.Errorf("WriteCache accepted the name %q", bad)
		}
	}
	if got := names(t, filepath.Join(dir, "cache", metas[0].ID)); !slices.Equal(got, []string{"summary.json"}) {
		t.Errorf("cache dir holds %v", got)
	}

	// Delete.
	cacheDir := filepath.Join(dir, "cache", metas[0].ID)
	if err := s.Delete(metas[0].ID); err != nil {
		t.Fatal(err)
	}
	if exists(s.Path(metas[0].ID)) || exists(filepath.Join(dir, "snapshots", metas[0].ID+".json")) || exists(cacheDir) {
		t.Fatal("Delete left files behind")
	}
	if !slices.Equal(removed, []string{metas[0].ID}) {
		t.Fatalf("OnRemove got %v", removed)
	}
	if err := s.Delete(metas[0].ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if err := s.Delete("../../etc/passwd"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete of a path: %v", err)
	}
	if err := s.Verify(metas[0].ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Verify of a deleted snapshot: %v", err)
	}
	if s.Path("../x") != "" {
		t.Error("Path accepted a non-ID")
	}
	want = want[:2]
	if got := s.List(); !slices.Equal(got, want) {
		t.Fatalf("after Delete List = %v, want %v", ids(got), ids(want))
	}

	// The index survives a restart, byte for byte.
	s.Close()
	if err := s.Delete(metas[1].ID); !errors.Is(err, ErrClosed) {
		t.Fatalf("Delete after Close: %v", err)
	}
	s2 := open(t, dir, Limits{})
	if got := s2.List(); !slices.Equal(got, want) {
		t.Fatalf("after reopen List = %+v, want %+v", got, want)
	}
	if len(s2.Recovered()) != 0 {
		t.Errorf("clean reopen recovered %v", s2.Recovered())
	}
	m4 := commit(t, s2, []byte("four"), Meta{})
	if m4.ID <= metas[2].ID {
		t.Errorf("ID after reopen %s does not sort after %s", m4.ID, metas[2].ID)
	}

	// Verify notices a changed byte even when the size is the same.
	p := s2.Path(metas[1].ID)
	data := slices.Clone(datas[metas[1].ID])
	data[500] ^= 1
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s2.Verify(metas[1].ID); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
		t.Fatalf("Verify of a corrupted pickle: %v", err)
	}
	if err := s2.Verify(metas[2].ID); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionByCount(t *testing.T) {
	s := open(t, t.TempDir(), Limits{MaxCount: 3})
	var removed []string
	s.OnRemove(func(id string) { removed = append(removed, id) })
	var all []string
	for i := range 5 {
		m := commit(t, s, []byte{byte(i)}, Meta{})
		all = append(all, m.ID)
		s.WriteCache(m.ID, "summary.json", []byte("x"))
	}
	if !slices.Equal(removed, all[:2]) {
		t.Fatalf("OnRemove got %v, want the two oldest %v", removed, all[:2])
	}
	if got := ids(s.List()); !slices.Equal(got, []string{all[4], all[3], all[2]}) {
		t.Fatalf("List = %v", got)
	}
	for _, id := range all[:2] {
		if exists(s.Path(id)) || exists(filepath.Join(s.Dir(), "snapshots", id+".json")) || exists(filepath.Join(s.Dir(), "cache", id)) {
			t.Errorf("files of %s left behind", id)
		}
	}
}

func TestRetentionByBytes(t *testing.T) {
	s := open(t, t.TempDir(), Limits{MaxBytes: 250})
	var removed []string
	s.OnRemove(func(id string) { removed = append(removed, id) })
	a := commit(t, s, make([]byte, 100), Meta{})
	b := commit(t, s, make([]byte, 100), Meta{})
	if len(removed) != 0 {
		t.Fatalf("removed %v at 200 bytes", removed)
	}
	c := commit(t, s, make([]byte, 100), Meta{}) // 300 > 250: a goes
	if !slices.Equal(removed, []string{a.ID}) {
		t.Fatalf("OnRemove got %v, want [%s]", removed, a.ID)
	}
	// One snapshot over the limit on its own: everything else goes, it stays.
	big := commit(t, s, make([]byte, 1000), Meta{})
	if !slices.Equal(removed, []string{a.ID, b.ID, c.ID}) {
		t.Fatalf("OnRemove got %v", removed)
	}
	if got := ids(s.List()); !slices.Equal(got, []string{big.ID}) {
		t.Fatalf("List = %v, want only the one just committed", got)
	}
	if err := s.Verify(big.ID); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Limits{})
	var all []string
	for i := range 4 {
		all = append(all, commit(t, s, []byte{byte(i)}, Meta{}).ID)
	}
	s.Close()
	s = open(t, dir, Limits{MaxCount: 2})
	if got := ids(s.List()); !slices.Equal(got, []string{all[3], all[2]}) {
		t.Fatalf("List after reopening with a lower limit = %v", got)
	}
	if r := strings.Join(s.Recovered(), "\n"); !strings.Contains(r, all[0]) || !strings.Contains(r, all[1]) {
		t.Errorf("Recovered does not name the removed snapshots: %s", r)
	}
	if _, err := Open(t.TempDir(), Limits{MaxCount: -1}); err == nil {
		t.Error("negative limit accepted")
	}
}

func TestRecoverAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Limits{})
	var good []Meta
	for i := range 3 {
		good = append(good, commit(t, s, bytes.Repeat([]byte{byte(i)}, 100), Meta{Reason: "request"}))
	}
	s.WriteCache(good[0].ID, "summary.json", []byte("{}"))
	s.Close()

	snap := filepath.Join(dir, "snapshots")
	write := func(p string, data string) string {
		t.Helper()
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	junk := map[string]string{ // path -> what it is
		write(filepath.Join(dir, "incoming", "agent-123.part"), "half a pickle"):                                                   "part",
		write(filepath.Join(snap, "20261129T110203.123Z-0007.pickle"), "no meta"):                                                  "pickle without meta",
		write(filepath.Join(snap, "20261129T110203.123Z-0008.json"), `{"id":`):                                                     "truncated meta",
		write(filepath.Join(snap, "20261129T110203.123Z-0008.pickle"), "its pickle"):                                               "pickle of the truncated meta",
		write(filepath.Join(snap, ".tmp-123456"), `{"id":"20261129T110203.123Z-0010"`):                                             "temp meta",
		write(filepath.Join(dir, "cache", ".tmp-999"), "x"):                                                                        "stray cache file",
		write(filepath.Join(dir, "cache", good[0].ID, ".tmp-42"), "half a summary"):                                                "temp cache file",
		write(filepath.Join(snap, "20261129T110203.123Z-0011.json"), `{"id":"20261129T110203.123Z-0011","sha256":"`+sha(nil)+`"}`): "meta without pickle",
	}
	// A meta whose pickle has the wrong size.
	wrongSize := "20261129T110203.123Z-0009"
	meta, err := os.ReadFile(filepath.Join(snap, good[1].ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	junk[write(filepath.Join(snap, wrongSize+".json"), strings.Replace(string(meta), good[1].ID, wrongSize, 1))] = "meta with a wrong-size pickle"
	junk[write(filepath.Join(snap, wrongSize+".pickle"), "too short")] = "wrong-size pickle"
	if err := os.MkdirAll(filepath.Join(dir, "cache", "20261129T110203.123Z-0007"), 0o700); err != nil {
		t.Fatal(err)
	}
	junk[filepath.Join(dir, "cache", "20261129T110203.123Z-0007")] = "cache of a missing snapshot"
	// The FIFO of a streamed capture the daemon was reading when it died.
	fifo := filepath.Join(dir, "incoming", "agent-124.part.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	junk[fifo] = "capture stream"
	// Not ours: left alone.
	keep := write(filepath.Join(snap, "README"), "hello")

	s = open(t, dir, Limits{})
	want := []Meta{good[2], good[1], good[0]}
	if got := s.List(); !slices.Equal(got, want) {
		t.Fatalf("List after crash = %v, want %v", ids(got), ids(want))
	}
	rec := strings.Join(s.Recovered(), "\n")
	t.Logf("Recovered:\n%s", rec)
	for p, what := range junk {
		if exists(p) {
			t.Errorf("%s (%s) survived Open", p, what)
		}
		if !strings.Contains(rec, p) {
			t.Errorf("Recovered does not name %s (%s)", p, what)
		}
	}
	if !strings.Contains(rec, "does not parse") || !strings.Contains(rec, "is 9 bytes, the meta says 100") {
		t.Errorf("Recovered does not say why the metas were bad")
	}
	if !exists(keep) {
		t.Error("Open removed a file it does not own")
	}
	if got, err := s.ReadCache(good[0].ID, "summary.json"); err != nil || string(got) != "{}" {
		t.Errorf("a good cache file was lost: %q %v", got, err)
	}
	for _, m := range s.List() {
		if err := s.Verify(m.ID); err != nil {
			t.Error(err)
		}
	}
	// The counter continues after the highest ID on disk, even one from the future.
	s.Close()
	future := "29991231T235959.999Z-0005"
	if err := os.WriteFile(filepath.Join(snap, future+".pickle"), []byte("f"), 0o600); err != nil {
		t.Fatal(err)
	}
	fm := strings.Replace(string(meta), good[1].ID, future, 1)
	fm = strings.Replace(fm, `"bytes": 100`, `"bytes": 1`, 1)
	if err := os.WriteFile(filepath.Join(snap, future+".json"), []byte(fm), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Limits{})
	if len(s.List()) != 4 {
		t.Fatalf("the future snapshot did not load: %v %v", ids(s.List()), s.Recovered())
	}
	if m := commit(t, s, []byte("next"), Meta{}); m.ID != "29991231T235959.999Z-0006" {
		t.Fatalf("ID after a future one = %s", m.ID)
	}
}

func TestCommitRefuses(t *testing.T) {
	s := open(t, t.TempDir(), Limits{})
	outside := filepath.Join(t.TempDir(), "x.part")
	if err := os.WriteFile(outside, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(s.IncomingDir(), name) }
	if err := os.Symlink(outside, in("link.part")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(in("dir.part"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in("noext"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in("linked.part"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in("linked.part"), filepath.Join(t.TempDir(), "other")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(in("sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in("sub/deep.part"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ part, want string }{
		{outside, "not inside " + s.IncomingDir()},
		{in("../snapshots/x.part"), "not inside"},
		{in("sub/deep.part"), "not inside"},
		{in("link.part"), "symbolic link"},
		{in("dir.part"), "not a regular file"},
		{in("noext"), `must end in ".part"`},
		{in("missing.part"), "no such file or directory"},
		{in("linked.part"), "2 hard links"},
	} {
		_, err := s.Commit(c.part, Meta{})
		if err == nil {
			t.Errorf("Commit(%s) succeeded", c.part)
			continue
		}
		name := filepath.Clean(c.part)
		if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Commit(%s) = %q, want it to name the file and say %q", c.part, err, c.want)
		}
	}
	if _, err := s.Commit(in("missing.part"), Meta{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v does not wrap ErrNotExist", err)
	}
	for _, p := range []string{outside, in("link.part"), in("dir.part"), in("noext"), in("linked.part")} {
		if !exists(p) {
			t.Errorf("a refused Commit removed %s", p)
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "data" {
		t.Error("the symlink's target changed")
	}
	if len(s.List()) != 0 || len(names(t, filepath.Join(s.Dir(), "snapshots"))) != 0 {
		t.Fatal("a refused Commit left something in the store")
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Limits{})
	_, err := Open(dir, Limits{})
	if !errors.Is(err, ErrLocked) || !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	lock := filepath.Join(dir, "lock")
	if !strings.Contains(err.Error(), lock) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("error %q does not name the lock file and its holder", err)
	}
	t.Log(err)
	s.Close()
	s2, err := Open(dir, Limits{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

// TestCommitFailureCleansUp injects a failure at each step of Commit and checks
// that nothing is left behind, nothing is listed, and the error names the file
// and wraps the cause.
func TestCommitFailureCleansUp(t *testing.T) {
	s := open(t, t.TempDir(), Limits{})
	snap := filepath.Join(s.Dir(), "snapshots")
	for _, c := range []struct{ step, names string }{
		{"hashed", ".part"},
		{"rename", ".pickle"},
		{"write-meta", ".json"},
		{"sync-meta", ".json"},
		{"rename-meta", ".json"},
		{"sync-dir", snap},
	} {
		var hit string
		testHook = func(step, path string) error {
			if step == c.step {
				hit = path
				return syscall.ENOSPC
			}
			return nil
		}
		part := writePart(t, s, []byte("some data"))
		_, err := s.Commit(part, Meta{})
		testHook = nil
		if hit == "" {
			t.Fatalf("step %s never ran", c.step)
		}
		if err == nil {
			t.Fatalf("%s: Commit succeeded", c.step)
		}
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "no space left on device") {
			t.Errorf("%s: error %q should name a %s file and wrap ENOSPC", c.step, err, c.names)
		}
		t.Logf("%s: %v", c.step, err)
		if len(s.List()) != 0 {
			t.Errorf("%s: listed %v", c.step, ids(s.List()))
		}
		if n := names(t, snap); len(n) != 0 {
			t.Errorf("%s: left %v in snapshots", c.step, n)
		}
		if n := names(t, s.IncomingDir()); len(n) != 0 {
			t.Errorf("%s: left %v in incoming", c.step, n)
		}
	}
	m := commit(t, s, []byte("after"), Meta{})
	if got := ids(s.List()); !slices.Equal(got, []string{m.ID}) {
		t.Fatalf("List = %v", got)
	}
}

func TestImport(t *testing.T) {
	s := open(t, t.TempDir(), Limits{})
	src := filepath.Join(t.TempDir(), "snap.pickle")
	data := bytes.Repeat([]byte("0123456789"), 300_000)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := s.Import(src, Meta{Label: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Reason != "import" || m.Source != "snap.pickle" || m.Label != "l" || m.SHA256 != sha(data) || m.Bytes != int64(len(data)) {
		t.Fatalf("Import returned %+v", m)
	}
	if got, _ := os.ReadFile(src); !bytes.Equal(got, data) {
		t.Fatal("Import changed its source")
	}
	if n := names(t, s.IncomingDir()); len(n) != 0 {
		t.Errorf("Import left %v in incoming", n)
	}
	if _, err := s.Import(filepath.Join(t.TempDir(), "missing"), Meta{}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Import of a missing file: %v", err)
	}
	if _, err := s.Import(t.TempDir(), Meta{}); err == nil {
		t.Error("Import of a directory succeeded")
	}
	if len(s.List()) != 1 || len(names(t, s.IncomingDir())) != 0 {
		t.Error("failed imports left something behind")
	}
}

func TestNewIncoming(t *testing.T) {
	s := open(t, t.TempDir(), Limits{})
	seen := map[string]bool{}
	for _, prefix := range []string{"", "agent", "../../etc/x", ".hidden", strings.Repeat("x", 100), "a b/c"} {
		p := s.NewIncoming(prefix)
		if filepath.Dir(p) != s.IncomingDir() || !strings.HasSuffix(p, ".part") || strings.HasPrefix(filepath.Base(p), ".") || seen[p] {
			t.Errorf("NewIncoming(%q) = %s", prefix, p)
		}
		seen[p] = true
		if exists(p) {
			t.Errorf("NewIncoming created %s", p)
		}
	}
}

func TestNextID(t *testing.T) {
	s := &Store{}
	t0 := time.Date(2026, 11, 29, 11, 2, 3, 123_456_789, time.UTC)
	steps := []struct {
		now  time.Time
		want string
	}{
		{t0, "20261129T110203.123Z-0001"},
		{t0, "20261129T110203.123Z-0002"},
		{t0.Add(-time.Hour), "20261129T110203.123Z-0003"}, // the clock went back
		{t0.Add(time.Millisecond), "20261129T110203.124Z-0001"},
	}
	for _, st := range steps {
		if got := s.nextID(st.now); got != st.want || !ValidID(got) {
			t.Fatalf("nextID(%v) = %s, want %s", st.now, got, st.want)
		}
	}
	s.lastSeq = maxSeq
	if got := s.nextID(t0); got != "20261129T110203.125Z-0001" {
		t.Fatalf("after an exhausted counter: %s", got)
	}
	for _, bad := range []string{"", "x", "20261129T110203.123Z-1", "../20261129T110203.123Z-0001", "20261129T110203.123Z-0001/", "20261129T110203.123Z-0001.json"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q)", bad)
		}
	}
}

// TestConcurrent commits, lists, caches and deletes from many goroutines (run
// with -race) and checks the disk matches the index afterwards.
func TestConcurrent(t *testing.T) {
	s := open(t, t.TempDir(), Limits{MaxCount: 15})
	var mu sync.Mutex
	removed := map[string]int{}
	s.OnRemove(func(id string) { mu.Lock(); removed[id]++; mu.Unlock() })
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 6 {
		wg.Go(func() {
			for i := range 10 {
				data := bytes.Repeat([]byte{byte(g), byte(i)}, 5000)
				p := s.NewIncoming("g")
				if err := os.WriteFile(p, data, 0o600); err != nil {
					errs <- err
					return
				}
				m, err := s.Commit(p, Meta{Rank: g})
				if err != nil {
					errs <- err
					return
				}
				s.WriteCache(m.ID, "summary.json", []byte("x")) // may race with retention: ErrNotFound is fine
				s.List()
				if i%3 == 0 {
					if err := s.Delete(m.ID); err != nil && !errors.Is(err, ErrNotFound) {
						errs <- err
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list := s.List()
	if len(list) > 15 {
		t.Errorf("%d listed, limit 15", len(list))
	}
	for id, n := range removed {
		if n != 1 {
			t.Errorf("OnRemove(%s) called %d times", id, n)
		}
		if _, ok := s.Get(id); ok {
			t.Errorf("%s removed but listed", id)
		}
	}
	if len(list)+len(removed) != 60 {
		t.Errorf("%d listed + %d removed != 60 committed", len(list), len(removed))
	}
	onDisk := names(t, filepath.Join(s.Dir(), "snapshots"))
	var want []string
	for _, m := range list {
		want = append(want, m.ID+".json", m.ID+".pickle")
		if err := s.Verify(m.ID); err != nil {
			t.Error(err)
		}
	}
	slices.Sort(want)
	if !slices.Equal(onDisk, want) {
		t.Errorf("snapshots/ holds %v, want %v", onDisk, want)
	}
	for _, n := range names(t, filepath.Join(s.Dir(), "cache")) {
		if _, ok := s.Get(n); !ok {
			t.Errorf("cache of removed snapshot %s left behind", n)
		}
	}
}
