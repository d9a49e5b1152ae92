package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxMetaSize bounds what Open reads of a meta file; real ones are < 1 KiB.
const maxMetaSize = 1 << 20

// recover removes what a crash can leave behind and loads the index from the
// meta files, noting each removal in s.recovered. It runs before s is shared.
func (s *Store) recover() error {
	note := func(format string, args ...any) { s.recovered = append(s.recovered, fmt.Sprintf(format, args...)) }
	remove := func(path, why string) bool {
		if err := s.remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			note("could not remove %s (%s): %v", path, why, cause(err))
			return false
		}
		note("removed %s: %s", path, why)
		return true
	}

	// incoming/: every .part is an upload that never got committed, every
	// .part.fifo the stream of a capture the daemon was reading.
	ents, err := s.readDir(s.incoming)
	if err != nil {
		return wrap("reading", s.incoming, err)
	}
	for _, e := range ents {
		if name := e.Name(); strings.HasSuffix(name, partExt) || strings.HasSuffix(name, partExt+".fifo") ||
			strings.HasPrefix(name, tmpPrefix) {
			remove(filepath.Join(s.incoming, name), "unfinished upload (never committed)")
		}
	}

	// snapshots/: temporary files, metas, pickles.
	ents, err = s.readDir(s.snapshots)
	if err != nil {
		return wrap("reading", s.snapshots, err)
	}
	changed := false
	var metaIDs []string
	pickles := map[string]fs.DirEntry{}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			changed = remove(filepath.Join(s.snapshots, name), "temporary file of an interrupted write") || changed
		case strings.HasSuffix(name, metaExt) && ValidID(strings.TrimSuffix(name, metaExt)):
			metaIDs = append(metaIDs, strings.TrimSuffix(name, metaExt))
		case strings.HasSuffix(name, pickleExt) && ValidID(strings.TrimSuffix(name, pickleExt)):
			pickles[strings.TrimSuffix(name, pickleExt)] = e
		}
	}
	for _, id := range metaIDs {
		m, why := s.loadMeta(id, pickles[id])
		if why != "" {
			changed = remove(s.metaPath(id), "bad snapshot meta ("+why+")") || changed
			continue // its pickle, if any, goes below as an orphan
		}
		s.metas[id] = m
		s.total += m.Bytes
	}
	for id := range pickles {
		if _, ok := s.metas[id]; !ok {
			changed = remove(s.Path(id), "snapshot data without a valid meta file (a commit interrupted before its commit point, or a corrupt meta)") || changed
		}
	}
	if changed {
		if err := s.syncDir(s.snapshots); err != nil {
			return wrap("syncing directory", s.snapshots, err)
		}
	}

	// groups/: temporary files of a group record being written.
	if ents, err := s.readDir(s.groupsDir()); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				remove(filepath.Join(s.groupsDir(), e.Name()), "temporary file of an interrupted group write")
			}
		}
	}

	// cache/: one directory per live snapshot.
	ents, err = s.readDir(s.cache)
	if err != nil {
		return wrap("reading", s.cache, err)
	}
	for _, e := range ents {
		p := filepath.Join(s.cache, e.Name())
		if _, ok := s.metas[e.Name()]; !ok || !e.IsDir() {
			if err := s.removeAll(p); err != nil {
				note("could not remove %s (cache of a snapshot that no longer exists): %v", p, cause(err))
			} else {
				note("removed %s: cache of a snapshot that no longer exists", p)
			}
			continue
		}
		files, err := s.readDir(p)
		if err != nil {
			note("could not read %s: %v", p, cause(err))
			continue
		}
		for _, f := range files {
			if strings.HasPrefix(f.Name(), tmpPrefix) {
				remove(filepath.Join(p, f.Name()), "temporary file of an interrupted write")
			}
		}
	}
	return nil
}

// loadMeta reads and checks snapshots/<id>.json against the pickle's directory
// entry (nil when there is no pickle). why is non-empty when it is unusable.
func (s *Store) loadMeta(id string, pickle fs.DirEntry) (m Meta, why string) {
	f, err := s.openFile(s.metaPath(id), os.O_RDONLY, 0)
	if err != nil {
		return m, cause(err).Error()
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMetaSize+1))
	f.Close()
	switch {
	case err != nil:
		return m, cause(err).Error()
	case len(data) > maxMetaSize:
		return m, fmt.Sprintf("larger than %d bytes", maxMetaSize)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, "does not parse: " + err.Error()
	}
	if m.ID != id {
		return m, fmt.Sprintf("its id is %q, its file name says %q", m.ID, id)
	}
	if b, err := hex.DecodeString(m.SHA256); err != nil || len(b) != 32 {
		return m, fmt.Sprintf("bad sha256 %q", m.SHA256)
	}
	if pickle == nil {
		return m, "its pickle " + s.Path(id) + " is missing"
	}
	fi, err := pickle.Info()
	if err != nil {
		return m, "its pickle: " + cause(err).Error()
	}
	if !fi.Mode().IsRegular() {
		return m, "its pickle is not a regular file"
	}
	if fi.Size() != m.Bytes {
		return m, fmt.Sprintf("its pickle is %d bytes, the meta says %d", fi.Size(), m.Bytes)
	}
	return m, ""
}
