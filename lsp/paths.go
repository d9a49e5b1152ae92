package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// paths maps recorded file names (a container's /workspace/trainer/…) to local
// ones: the pathMap settings first, then the file with the longest matching
// path suffix under the workspace folders (and the folders of opened files).
type paths struct {
	mu    sync.Mutex
	pm    *profiler.PathMap
	rules []string
	roots []string          // the workspace folders
	canon map[string]string // same's memo: a path and the file it resolves to
	// opened are the folders of files opened outside every workspace folder:
	// kept when the settings change (a didChangeConfiguration right after
	// the didOpen used to drop them, and the hints with them).
	opened []string
}

// reset rebuilds the map from rules, the workspace folders and the folders
// of the files opened outside them; errors name the bad rule.
func (p *paths) reset(rules, roots []string) []error {
	p.mu.Lock()
	opened := p.opened
	p.mu.Unlock()
	pm, errs := buildMap(rules, append(append([]string(nil), roots...), opened...))
	p.mu.Lock()
	p.pm, p.rules, p.roots = pm, rules, roots
	p.mu.Unlock()
	return errs
}

func buildMap(rules, roots []string) (*profiler.PathMap, []error) {
	pm := &profiler.PathMap{}
	var errs []error
	for _, r := range rules {
		if err := pm.AddRule(r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range roots {
		pm.AddRoot(r) // a missing folder simply maps nothing
	}
	return pm, errs
}

// addRoot adds the folder of a file opened outside every root.
func (p *paths) addRoot(file string) {
	dir := filepath.Dir(file)
	p.mu.Lock()
	for _, r := range append(append([]string(nil), p.roots...), p.opened...) {
		if dir == r || strings.HasPrefix(dir, r+string(filepath.Separator)) {
			p.mu.Unlock()
			return
		}
	}
	p.opened = append(p.opened, dir)
	rules, roots := p.rules, p.roots
	p.mu.Unlock()
	p.reset(rules, roots)
}

// local is the local name of a recorded file (unchanged when none is found).
func (p *paths) local(recorded string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pm == nil {
		return recorded
	}
	return p.pm.Map(recorded)
}

// maxCanon bounds same's memo (the files an editor session touches).
const maxCanon = 4096

// same says whether two local paths name one file: equal, or equal once
// their symbolic links are resolved (a workspace opened through a link: the
// editor's document is the link's path, the map's root the file's own).
func (p *paths) same(a, b string) bool {
	return a == b || (a != "" && b != "" && p.resolve(a) == p.resolve(b))
}

func (p *paths) resolve(path string) string {
	p.mu.Lock()
	r, ok := p.canon[path]
	p.mu.Unlock()
	if ok {
		return r
	}
	r = path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		r = real
	}
	p.mu.Lock()
	if p.canon == nil || len(p.canon) >= maxCanon {
		p.canon = map[string]string{}
	}
	p.canon[path] = r
	p.mu.Unlock()
	return r
}

// sitesIn lists the user sites of a snapshot that belong to the local file,
// by line (several recorded files may map to one local file).
func (p *paths) sitesIn(l *loaded, file string) map[int]analyze.Site {
	if l == nil || file == "" {
		return nil
	}
	out := map[int]analyze.Site{}
	for recorded, sites := range l.byFile {
		if recorded != file && !p.same(p.local(recorded), file) {
			continue
		}
		for _, s := range sites {
			if old, ok := out[s.Line]; ok { // one line, two functions (a lambda): add them up
				old.Add(s)
				out[s.Line] = old
				continue
			}
			out[s.Line] = s
		}
	}
	return out
}

// inWorkspace resolves a path from the settings or a command as the README
// says: ~/ is the home folder, a relative path is inside the first workspace
// folder (the server's own working directory is wherever the editor started
// it), and with no folder it is left to the working directory.
func (s *Server) inWorkspace(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.roots) == 0 {
		return p
	}
	return filepath.Join(s.roots[0], p)
}

// mapRules resolves the LOCAL side of each REMOTE=LOCAL rule (inWorkspace).
func (s *Server) mapRules(rules []string) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		remote, local, ok := strings.Cut(r, "=")
		if ok && local != "" {
			r = remote + "=" + s.inWorkspace(local)
		}
		out[i] = r
	}
	return out
}
