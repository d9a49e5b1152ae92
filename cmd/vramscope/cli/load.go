package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// source is the flags every command that reads a snapshot shares.
type source struct {
	maps  multi
	roots multi
	names string
	// keepTrace keeps the allocations in order for fit (analyze.Options.KeepTrace).
	keepTrace bool
}

func (s *source) register(fs *flag.FlagSet) {
	fs.Var(&s.maps, "map", "REMOTE=LOCAL: read recorded paths under REMOTE from LOCAL (repeatable)")
	fs.Var(&s.roots, "root", "DIR: find recorded files by their path suffix under DIR (repeatable)")
	fs.StringVar(&s.names, "names", "", `FILE: a JSON object {"recorded file": "name"}: the names findings and phase names give those files (the notebook's "cell [3]")`)
}

// options are the analysis options the flags give.
func (s *source) options() (analyze.Options, error) {
	pm, err := s.pathMap()
	if err != nil {
		return analyze.Options{}, err
	}
	opt := analyze.Options{Paths: pm}
	if s.names == "" {
		return opt, nil
	}
	b, err := readNames(s.names)
	if err != nil {
		return opt, inputError{fmt.Errorf("--names: %w", err)}
	}
	if err := json.Unmarshal(b, &opt.FileNames); err != nil {
		return opt, inputError{fmt.Errorf("--names %s: want a JSON object of file names to names: %w", s.names, err)}
	}
	return opt, nil
}

// maxNamesBytes bounds a --names file: a name for each of 100,000 files
// fits in 16 MiB; /dev/zero read whole exhausted the memory.
const maxNamesBytes = 16 << 20

// readNames reads a --names file: a regular file only (a FIFO blocked
// for ever), of at most maxNamesBytes. Errors name the file.
func readNames(path string) ([]byte, error) {
	f, fi, err := torchsnap.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > maxNamesBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a names file may have", path, fi.Size(), maxNamesBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxNamesBytes+1))
	if err == nil && len(b) > maxNamesBytes {
		err = fmt.Errorf("%s grew past the %d bytes a names file may have", path, maxNamesBytes)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
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
	return s.run(path, stderr, 0)
}

// run is load with the device's memory (analyze --device-memory; 0: unknown).
func (s *source) run(path string, stderr io.Writer, deviceMemory int64) (*analyze.Result, error) {
	opt, err := s.options()
	if err != nil {
		return nil, err
	}
	if path, err = storedPath(path); err != nil {
		return nil, err
	}
	prog, done := progress(stderr, "reading "+path)
	opt.Progress, opt.DeviceMemory, opt.KeepTrace = prog, deviceMemory, s.keepTrace
	res, err := analyze.Run(path, opt)
	done()
	if err != nil {
		return nil, inputError{err}
	}
	return res, nil
}
