package cli

import (
	"flag"
	"io"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// source is the flags every command that reads a snapshot shares.
type source struct {
	maps  multi
	roots multi
}

func (s *source) register(fs *flag.FlagSet) {
	fs.Var(&s.maps, "map", "REMOTE=LOCAL: read recorded paths under REMOTE from LOCAL (repeatable)")
	fs.Var(&s.roots, "root", "DIR: find recorded files by their path suffix under DIR (repeatable)")
}

func (s *source) pathMap() (*profiler.PathMap, error) {
	if len(s.maps) == 0 && len(s.roots) == 0 {
		return nil, nil
	}
	pm := &profiler.PathMap{}
	for _, m := range s.maps {
		if err := pm.AddRule(m); err != nil {
			return nil, inputError{err}
		}
	}
	for _, r := range s.roots {
		if err := pm.AddRoot(r); err != nil {
			return nil, inputError{err}
		}
	}
	return pm, nil
}

// load analyses one snapshot file; every failure to read it is an input error.
func (s *source) load(path string, stderr io.Writer) (*analyze.Result, error) {
	pm, err := s.pathMap()
	if err != nil {
		return nil, err
	}
	prog, done := progress(stderr, "reading "+path)
	res, err := analyze.Run(path, analyze.Options{Paths: pm, Progress: prog})
	done()
	if err != nil {
		return nil, inputError{err}
	}
	return res, nil
}
