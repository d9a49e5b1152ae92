package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Default retention limits, used where Limits leaves a field at zero.
const (
	DefaultMaxCount       = 200
	DefaultMaxBytes int64 = 20 << 30
)

// Errors callers can test with errors.Is.
var (
	ErrNotFound = errors.New("store: snapshot not found")
	ErrCorrupt  = errors.New("store: snapshot does not match its meta")
	ErrLocked   = errors.New("store: data directory is in use")
	ErrClosed   = errors.New("store: closed")
)

// Limits bounds what the store keeps. Zero fields mean the defaults (200
// snapshots, 20 GiB); negative ones are refused by Open.
type Limits struct {
	MaxCount int
	MaxBytes int64
}

// Store is a directory of committed snapshots. It is safe for concurrent use.
// One Store per directory: Open takes an advisory lock on <dir>/lock.
type Store struct {
	dir, incoming, snapshots, cache string
	lim                             Limits
	root                            *os.Root // the data directory: every file operation goes through it (datadir.go)
	lock                            *os.File

	mu        sync.Mutex
	metas     map[string]Meta
	total     int64 // bytes of all indexed pickles
	lastTS    string
	lastSeq   int
	onRemove  []func(id string)
	recovered []string
	closed    bool
}

const (
	idLayout  = "20060102T150405.000Z"
	tmpPrefix = ".tmp-"
	partExt   = ".part"
	pickleExt = ".pickle"
	metaExt   = ".json"
	maxSeq    = 9999
)

var idRE = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9]{4}$`)

// ValidID reports whether id has the form of a store ID (and so is safe as a
// file name). It does not say whether the snapshot exists.
func ValidID(id string) bool { return idRE.MatchString(id) }

// testHook, when set by a test, is called at each step of Commit with the step
// name and the file involved; an error it returns is treated as that step's
// failure. Nil in production.
var testHook func(step, path string) error

func hook(step, path string) error {
	if testHook == nil {
		return nil
	}
	return testHook(step, path)
}

// Open opens (creating it, with parents, mode 0700) the store in dir, takes its
// lock, cleans up what a crash left behind (see Recovered) and loads the index
// from the meta files.
func Open(dir string, lim Limits) (*Store, error) {
	if lim.MaxCount < 0 || lim.MaxBytes < 0 {
		return nil, fmt.Errorf("store: negative limits %+v", lim)
	}
	if lim.MaxCount == 0 {
		lim.MaxCount = DefaultMaxCount
	}
	if lim.MaxBytes == 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: data directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, wrap("creating data directory", abs, err)
	}
	// The store, and the agents it tells where incoming is, use the path
	// with its symbolic links resolved: one in it that another user owns
	// could be pointed elsewhere once the store has checked it.
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, wrap("resolving data directory", dir, err)
	}
	root, err := openDataDir(abs)
	if err != nil {
		return nil, err
	}
	s := &Store{
		root:      root,
		dir:       abs,
		incoming:  filepath.Join(abs, "incoming"),
		snapshots: filepath.Join(abs, "snapshots"),
		cache:     filepath.Join(abs, "cache"),
		lim:       lim,
		metas:     map[string]Meta{},
	}
	s.lock, err = s.lockDir(filepath.Join(abs, "lock"))
	if err != nil {
		root.Close()
		return nil, err
	}
	if err = s.openDirs(); err == nil {
		err = s.recover()
	}
	if err != nil {
		s.lock.Close()
		root.Close()
		return nil, err
	}
	for id := range s.metas {
		s.noteID(id)
	}
	// Limits may have been lowered since the last run.
	for _, id := range s.retentionLocked("") {
		s.removeFiles(id)
		s.recovered = append(s.recovered, "removed snapshot "+id+" to stay within the retention limits")
	}
	return s, nil
}

// Close releases the directory lock. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.lock.Close() // closing the descriptor releases the flock
	s.root.Close()
	return err
}

// Limits are the store's retention limits, defaults filled in.
func (s *Store) Limits() Limits { return s.lim }

// Dir is the store's data directory (absolute).
func (s *Store) Dir() string { return s.dir }

// IncomingDir is where snapshots are written before Commit: <dir>/incoming.
func (s *Store) IncomingDir() string { return s.incoming }

// Recovered describes, one line each, what Open removed (leftovers of a crash,
// corrupt meta files, snapshots over the limits), for the daemon to log.
func (s *Store) Recovered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recovered)
}

// OnRemove registers fn to be called, outside the store's lock, with the ID of
// each snapshot that Delete or retention removes.
func (s *Store) OnRemove(fn func(id string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRemove = append(s.onRemove, fn)
}

var prefixRE = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// OwnPrefix starts the name of every file NewIncoming makes: the daemon's
// own uploads and the files it asks agents to dump into, which no client may
// hand over as its own.
const OwnPrefix = "daemon-"

// NewIncoming returns a fresh path in IncomingDir ending in ".part" for a
// snapshot to be written to and then committed, named OwnPrefix, prefix and
// a random part. prefix is sanitized for use in a file name. The file is not
// created.
func (s *Store) NewIncoming(prefix string) string {
	prefix = prefixRE.ReplaceAllString(prefix, "_")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	if prefix == "" {
		prefix = "snapshot"
	}
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return filepath.Join(s.incoming, fmt.Sprintf("%s%s-%s-%s%s", OwnPrefix, prefix,
		time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(b[:]), partExt))
}

// Path is the pickle's path for id ("" for a string that is not an ID). It
// does not check that the snapshot exists.
func (s *Store) Path(id string) string {
	if !ValidID(id) {
		return ""
	}
	return filepath.Join(s.snapshots, id+pickleExt)
}

func (s *Store) metaPath(id string) string { return filepath.Join(s.snapshots, id+metaExt) }

// List returns every snapshot, newest first.
func (s *Store) List() []Meta {
	s.mu.Lock()
	out := make([]Meta, 0, len(s.metas))
	for _, m := range s.metas {
		out = append(out, m)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Meta) int { return strings.Compare(b.ID, a.ID) })
	return out
}

// Get returns the meta of snapshot id.
func (s *Store) Get(id string) (Meta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metas[id]
	return m, ok
}

// Commit moves the finished file part (a regular file directly inside
// IncomingDir, ending in ".part") into the store as a new snapshot described by
// m, and returns m with ID, Created, Bytes and SHA256 set. Once part has passed
// those checks, Commit owns it: on failure it is removed along with everything
// Commit wrote, and nothing is listed. After a successful commit the oldest
// snapshots are removed as the Limits require.
func (s *Store) Commit(part string, m Meta) (Meta, error) {
	p, err := s.Prepare(part)
	if err != nil {
		return Meta{}, err
	}
	return s.CommitPrepared(p, m)
}

// Prepared is a finished incoming file, synced and hashed, ready to commit.
type Prepared struct {
	abs  string
	size int64
	sum  string
}

// Prepare checks, syncs and hashes part (the slow half of Commit), so that a
// caller can do it while it reads the file for something else. On failure part
// is removed. A Prepared must be passed to CommitPrepared or Discard.
func (s *Store) Prepare(part string) (Prepared, error) {
	return s.prepare(part, func(abs string) (int64, string, error) {
		size, sum, err := s.hashPart(abs)
		if err == nil {
			if herr := hook("hashed", abs); herr != nil {
				err = wrap("hashing", abs, herr)
			}
		}
		return size, sum, err
	})
}

// PrepareHashed is Prepare for a file whose writer hashed it on the way in
// (the daemon tees a streamed snapshot into part): it checks part, syncs it
// and checks its size, without reading it again.
func (s *Store) PrepareHashed(part string, size int64, sum string) (Prepared, error) {
	return s.prepare(part, func(abs string) (int64, string, error) {
		f, fi, err := s.openSynced(abs)
		if err != nil {
			return 0, "", err
		}
		f.Close()
		if fi.Size() != size {
			return 0, "", fmt.Errorf("store: committing %s: %d bytes on disk, %d written", abs, fi.Size(), size)
		}
		return size, sum, nil
	})
}

// prepare checks part and runs finish on it (sync, and hash or trust a hash);
// on failure part is removed.
func (s *Store) prepare(part string, finish func(abs string) (int64, string, error)) (Prepared, error) {
	if err := s.checkOpen(); err != nil {
		return Prepared{}, err
	}
	abs, err := s.checkPart(part)
	if err != nil {
		return Prepared{}, err
	}
	size, sum, err := finish(abs)
	if err != nil {
		s.remove(abs)
		return Prepared{}, err
	}
	return Prepared{abs: abs, size: size, sum: sum}, nil
}

// Discard removes a prepared file that will not be committed.
func (s *Store) Discard(p Prepared) {
	if p.abs != "" {
		s.remove(p.abs)
	}
}

// CommitPrepared is the rest of Commit for a file Prepare synced and hashed.
func (s *Store) CommitPrepared(p Prepared, m Meta) (Meta, error) {
	abs, size, sum := p.abs, p.size, p.sum
	removePart := true
	defer func() {
		if removePart {
			s.remove(abs)
		}
	}()
	if err := s.checkOpen(); err != nil {
		return Meta{}, err
	}

	now := time.Now().UTC()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Meta{}, ErrClosed
	}
	id := s.nextID(now)
	s.mu.Unlock()

	m.ID, m.Created, m.Bytes, m.SHA256 = id, now, size, sum
	pickle := s.Path(id)
	if err := hook("rename", pickle); err != nil {
		return Meta{}, wrap("moving snapshot into place", pickle, err)
	}
	if err := s.rename(abs, pickle); err != nil {
		return Meta{}, wrap("moving snapshot into place", pickle, err)
	}
	removePart = false
	if err := s.writeMeta(m); err != nil {
		s.remove(s.metaPath(id))
		s.remove(pickle)
		s.syncDir(s.snapshots)
		return Meta{}, err
	}
	s.syncDir(s.incoming) // the .part's name is gone; best effort (the commit is durable already)

	s.mu.Lock()
	if s.closed {
		// Closed while we were writing: the files are committed and will be
		// listed at the next Open, but this Store must not change any more.
		s.mu.Unlock()
		return m, nil
	}
	s.metas[id] = m
	s.total += m.Bytes
	victims := s.retentionLocked(id)
	fns := slices.Clone(s.onRemove)
	s.mu.Unlock()
	s.afterRemove(victims, fns)
	return m, nil
}

// writeMeta writes m as snapshots/<id>.json through a temporary file, fsyncs it,
// renames it into place (the commit point) and fsyncs the directory. On error
// the temporary file is removed; the caller removes the rest.
func (s *Store) writeMeta(m Meta) error {
	final := s.metaPath(m.ID)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return wrap("encoding snapshot meta", final, err)
	}
	data = append(data, '\n')
	if err := s.writeFileAtomic(s.snapshots, final, "writing snapshot meta", data); err != nil {
		return err
	}
	if err := hook("sync-dir", s.snapshots); err != nil {
		return wrap("syncing directory", s.snapshots, err)
	}
	if err := s.syncDir(s.snapshots); err != nil {
		return wrap("syncing directory", s.snapshots, err)
	}
	return nil
}

// writeFileAtomic writes data to final via a temporary file in dir: write,
// fsync, close, rename. On error nothing new is left behind.
// what names the operation in errors ("writing snapshot meta").
func (s *Store) writeFileAtomic(dir, final, what string, data []byte) (err error) {
	f, tmp, err := s.createTemp(dir)
	if err != nil {
		return wrap(what, final, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			s.remove(tmp)
		}
	}()
	if err = hook("write-meta", tmp); err == nil {
		_, err = f.Write(data)
	}
	if err != nil {
		return wrap(what, final, err)
	}
	if err = hook("sync-meta", tmp); err == nil {
		err = f.Sync()
	}
	if err != nil {
		return wrap(what, final, err)
	}
	if err = f.Close(); err != nil {
		return wrap(what, final, err)
	}
	if err = hook("rename-meta", final); err == nil {
		err = s.rename(tmp, final)
	}
	if err != nil {
		return wrap(what, final, err)
	}
	return nil
}

// Import copies src into IncomingDir and commits it. Reason defaults to
// "import" and Source to src's base name.
func (s *Store) Import(src string, m Meta) (Meta, error) {
	if m.Source == "" {
		m.Source = filepath.Base(src)
	}
	part, err := s.Stage(src)
	if err != nil {
		return Meta{}, err
	}
	return s.commitImport(part, m)
}

// Stage copies src into a new .part file in IncomingDir, for a caller that
// checks the copy before it commits it (or removes it). The .part is removed
// on any error.
//
// src is opened non-blocking and checked by fstat before a byte is read: a
// plain open of a named pipe waits for a writer, holding an OS thread (a
// thousand of them exhausted the daemon's threads).
func (s *Store) Stage(src string) (string, error) {
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", wrap("opening import", src, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", wrap("opening import", src, err)
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("store: importing %s: not a regular file but %s", src, FileKind(fi.Mode()))
	}
	return s.stageFrom(f, src)
}

// StageFrom copies r (named name in errors) into a new .part file in
// IncomingDir, like Stage, for a caller that opened the file itself.
func (s *Store) StageFrom(r io.Reader, name string) (string, error) { return s.stageFrom(r, name) }

// importFrom copies r (named name in errors) into a new .part file and commits
// it. The .part is removed on any error.
func (s *Store) importFrom(r io.Reader, name string, m Meta) (Meta, error) {
	part, err := s.stageFrom(r, name)
	if err != nil {
		return Meta{}, err
	}
	return s.commitImport(part, m)
}

func (s *Store) commitImport(part string, m Meta) (Meta, error) {
	if m.Reason == "" {
		m.Reason = "import"
	}
	return s.Commit(part, m) // fsyncs it, and removes it on failure
}

// stageFrom copies r into a new .part file; the file is removed on any error.
func (s *Store) stageFrom(r io.Reader, name string) (string, error) {
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	part := s.NewIncoming("import")
	w, err := s.openFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", wrap("creating", part, err)
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				w.Close()
				s.remove(part)
				return "", wrap("writing", part, werr)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			w.Close()
			s.remove(part)
			return "", wrap("reading import", name, rerr)
		}
	}
	if err := w.Close(); err != nil {
		s.remove(part)
		return "", wrap("writing", part, err)
	}
	return part, nil
}

// Delete removes snapshot id and its cache. It returns ErrNotFound when there
// is no such snapshot.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if _, ok := s.metas[id]; !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	// Removing the meta file is the point of no return, as writing it was.
	if err := s.remove(s.metaPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.mu.Unlock()
		return wrap("deleting snapshot meta", s.metaPath(id), err)
	}
	s.total -= s.metas[id].Bytes
	delete(s.metas, id)
	fns := slices.Clone(s.onRemove)
	s.mu.Unlock()
	s.afterRemove([]string{id}, fns)
	return nil
}

// retentionLocked removes from the index the oldest snapshots (never keep)
// while the store is over its limits, and returns their IDs; the caller removes
// their files with afterRemove or removeFiles. s.mu must be held.
func (s *Store) retentionLocked(keep string) []string {
	if len(s.metas) <= s.lim.MaxCount && s.total <= s.lim.MaxBytes {
		return nil
	}
	ids := make([]string, 0, len(s.metas))
	for id := range s.metas {
		ids = append(ids, id)
	}
	slices.Sort(ids) // oldest first
	var victims []string
	for _, id := range ids {
		if len(s.metas) <= s.lim.MaxCount && s.total <= s.lim.MaxBytes {
			break
		}
		if id == keep {
			continue
		}
		victims = append(victims, id)
		s.total -= s.metas[id].Bytes
		delete(s.metas, id)
	}
	return victims
}

// afterRemove removes the files of snapshots already taken out of the index,
// then tells the OnRemove callbacks.
func (s *Store) afterRemove(ids []string, fns []func(string)) {
	for _, id := range ids {
		s.removeFiles(id)
	}
	if len(ids) > 0 {
		s.syncDir(s.snapshots)
	}
	for _, id := range ids {
		for _, fn := range fns {
			fn(id)
		}
	}
}

// removeFiles removes a snapshot's files, meta first. Failures leave orphans
// that the next Open removes, so they are not reported.
func (s *Store) removeFiles(id string) {
	s.remove(s.metaPath(id))
	s.remove(s.Path(id))
	s.removeAll(filepath.Join(s.cache, id))
}

// Verify re-hashes snapshot id's pickle and compares size and SHA-256 with its
// meta; a mismatch is an error wrapping ErrCorrupt.
func (s *Store) Verify(id string) error {
	m, ok := s.Get(id)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	p := s.Path(id)
	f, err := s.openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return wrap("verifying", p, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return wrap("verifying", p, err)
	}
	if n != m.Bytes {
		return fmt.Errorf("%w: %s is %d bytes, its meta says %d", ErrCorrupt, p, n, m.Bytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		return fmt.Errorf("%w: %s has sha256 %s, its meta says %s", ErrCorrupt, p, got, m.SHA256)
	}
	return nil
}

// WriteCache stores data as cache file name of snapshot id, atomically. The
// cache goes when the snapshot does.
func (s *Store) WriteCache(id, name string, data []byte) error {
	if err := checkCacheName(name); err != nil {
		return err
	}
	// Under the lock, so that a concurrent Delete cannot remove the
	// directory between our check and our write and leave an orphan.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.metas[id]; !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	dir := filepath.Join(s.cache, id)
	if err := s.mkdir(dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return wrap("creating cache directory", dir, err)
	}
	return s.writeFileAtomic(dir, filepath.Join(dir, name), "writing cache file", data)
}

// ReadCache returns cache file name of snapshot id. A missing snapshot is
// ErrNotFound; a missing cache file is an error wrapping fs.ErrNotExist.
func (s *Store) ReadCache(id, name string) ([]byte, error) {
	if err := checkCacheName(name); err != nil {
		return nil, err
	}
	if _, ok := s.Get(id); !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	p := filepath.Join(s.cache, id, name)
	data, err := s.readFile(p)
	if err != nil {
		return nil, wrap("reading cache file", p, err)
	}
	return data, nil
}

func checkCacheName(name string) error {
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") ||
		strings.ContainsAny(name, `/\`+"\x00") || len(name) > 200 {
		return fmt.Errorf("store: bad cache file name %q", name)
	}
	return nil
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// CheckPart returns the absolute path of part after checking that it is a
// regular file (not a symlink, not hard-linked) directly inside IncomingDir,
// named *.part: what Prepare and Commit accept, and what a caller may remove.
func (s *Store) CheckPart(part string) (string, error) { return s.checkPart(part) }

func (s *Store) checkPart(part string) (string, error) {
	abs, err := filepath.Abs(part)
	if err != nil {
		return "", fmt.Errorf("store: refusing to commit %q: %w", part, err)
	}
	if abs == s.incoming {
		return "", fmt.Errorf("store: refusing to commit %s: it is the incoming directory itself, not a file in it", abs)
	}
	if filepath.Dir(abs) != s.incoming {
		return "", fmt.Errorf("store: refusing to commit %s: not inside %s", abs, s.incoming)
	}
	if !strings.HasSuffix(abs, partExt) || strings.HasPrefix(filepath.Base(abs), ".") {
		return "", fmt.Errorf("store: refusing to commit %s: the name must end in %q", abs, partExt)
	}
	fi, err := s.lstat(abs)
	if err != nil {
		return "", fmt.Errorf("store: refusing to commit %s: %w", abs, cause(err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return "", fmt.Errorf("store: refusing to commit %s: it is a symbolic link", abs)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("store: refusing to commit %s: not a regular file but %s", abs, FileKind(fi.Mode()))
	}
	if n := linkCount(fi); n > 1 {
		return "", fmt.Errorf("store: refusing to commit %s: it has %d hard links (its data could change under the store)", abs, n)
	}
	return abs, nil
}

// hashPart fsyncs the file and streams it through SHA-256. It refuses a file
// that changes size while being read (a writer that has not finished).
func (s *Store) hashPart(path string) (int64, string, error) {
	f, fi, err := s.openSynced(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", wrap("hashing", path, err)
	}
	if fi2, err := f.Stat(); err != nil {
		return 0, "", wrap("hashing", path, err)
	} else if fi2.Size() != n || fi.Size() != n {
		return 0, "", fmt.Errorf("store: committing %s: the file changed while being read (%d bytes, then %d): is it still being written?", path, fi.Size(), fi2.Size())
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// openSynced opens a part file that must be a regular file (no symlink) and
// fsyncs it.
func (s *Store) openSynced(path string) (*os.File, os.FileInfo, error) {
	f, err := s.openFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO put there waits for no writer
	if err != nil {
		return nil, nil, wrap("opening", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, wrap("opening", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("store: refusing to commit %s: not a regular file but %s", path, FileKind(fi.Mode()))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, nil, wrap("syncing", path, err)
	}
	return f, fi, nil
}

// FileKind names a file's type in words ("a named pipe (FIFO)").
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a " + m.Type().String()
}

// nextID returns a new ID, strictly greater than every ID seen so far (even if
// the clock went backwards). s.mu must be held.
func (s *Store) nextID(now time.Time) string {
	ts := now.UTC().Format(idLayout)
	switch {
	case ts > s.lastTS:
		s.lastTS, s.lastSeq = ts, 1
	case s.lastSeq < maxSeq:
		s.lastSeq++
	default: // counter exhausted: borrow the next millisecond
		t, _ := time.Parse(idLayout, s.lastTS)
		s.lastTS, s.lastSeq = t.Add(time.Millisecond).Format(idLayout), 1
	}
	return fmt.Sprintf("%s-%04d", s.lastTS, s.lastSeq)
}

// noteID makes later IDs sort after id. s.mu must be held (or s unshared).
func (s *Store) noteID(id string) {
	ts, seqStr, _ := strings.Cut(id, "-")
	var seq int
	fmt.Sscanf(seqStr, "%d", &seq)
	if ts > s.lastTS || (ts == s.lastTS && seq > s.lastSeq) {
		s.lastTS, s.lastSeq = ts, seq
	}
}

// wrap makes "store: <doing> <path>: <cause>", keeping the cause (an errno,
// usually) for errors.Is while not repeating the path an *os.PathError carries.
func wrap(doing, path string, err error) error {
	return fmt.Errorf("store: %s %s: %w", doing, path, cause(err))
}

func cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	case errors.As(err, &se):
		return se.Err
	}
	return err
}
