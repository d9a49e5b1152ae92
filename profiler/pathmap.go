package profiler

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PathMap turns file names recorded on another machine (a remote box, a
// container: /workspace/trainer/train.py) into local ones, first by explicit
// prefix rules, then by finding the file with the longest matching path suffix
// under local roots.
type PathMap struct {
	rules  []mapRule
	roots  []string
	byBase map[string][]string // base name -> local files under roots
	cache  map[string]string
}

type mapRule struct{ remote, local string }

// ParseMapRule reads REMOTE=LOCAL.
func (m *PathMap) AddRule(spec string) error {
	remote, local, ok := strings.Cut(spec, "=")
	if !ok || remote == "" || local == "" {
		return fmt.Errorf("path mapping %q: want REMOTE=LOCAL", spec)
	}
	m.rules = append(m.rules, mapRule{strings.TrimRight(remote, "/"), strings.TrimRight(local, "/")})
	m.cache = nil
	return nil
}

// AddRoot makes files under dir candidates for suffix matching. The walk is
// bounded so pointing it at a huge tree stays cheap.
func (m *PathMap) AddRoot(dir string) error {
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("path root %s: %w", dir, err)
	} else if !st.IsDir() {
		return fmt.Errorf("path root %s: not a directory", dir)
	}
	if m.byBase == nil {
		m.byBase = map[string][]string{}
	}
	seen := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			name := d.Name()
			if p != dir && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "__pycache__") {
				return filepath.SkipDir
			}
			return nil
		}
		if seen++; seen > 200000 {
			return filepath.SkipAll
		}
		if strings.HasSuffix(p, ".py") || strings.HasSuffix(p, ".ipynb") {
			m.byBase[d.Name()] = append(m.byBase[d.Name()], p)
		}
		return nil
	})
	m.roots = append(m.roots, dir)
	m.cache = nil
	return err
}

// Map returns the local name of a recorded file, or the name unchanged.
func (m *PathMap) Map(file string) string {
	if m == nil || file == "" {
		return file
	}
	if v, ok := m.cache[file]; ok {
		return v
	}
	out := m.resolve(file)
	if m.cache == nil {
		m.cache = map[string]string{}
	}
	m.cache[file] = out
	return out
}

func (m *PathMap) resolve(file string) string {
	for _, r := range m.rules {
		if file == r.remote || strings.HasPrefix(file, r.remote+"/") {
			return r.local + file[len(r.remote):]
		}
	}
	if _, err := os.Stat(file); err == nil {
		return file
	}
	best, bestLen := "", 0
	for _, cand := range m.byBase[filepath.Base(file)] {
		if n := CommonSuffix(file, cand); n > bestLen {
			best, bestLen = cand, n
		}
	}
	// A library file matched by its base name alone (torch's functional.py and
	// the user's own functional.py) is no match.
	if best != "" && (bestLen >= 2 || IsUserFile(file)) {
		return best
	}
	return file
}

// CommonSuffix counts the path components two names share at their ends
// (/workspace/trainer/train.py and /home/me/trainer/train.py: 2).
func CommonSuffix(a, b string) int {
	as, bs := strings.Split(filepath.ToSlash(a), "/"), strings.Split(filepath.ToSlash(b), "/")
	n := 0
	for n < len(as) && n < len(bs) && as[len(as)-1-n] == bs[len(bs)-1-n] {
		n++
	}
	return n
}
