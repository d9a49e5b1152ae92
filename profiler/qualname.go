package profiler

import (
	"bytes"
	"os"
	"strings"
	"sync"
)

// Qualnames recovers a frame's class from its source: PyTorch records only a
// frame's function name ("forward"), so a model reads as a column of forwards.
// Given the file on disk (a recorded path, or one PathMap mapped), the class
// of the def at a line is found by reading Python's indentation. Each file is
// read once; a file that is missing, unreadable or too large keeps bare names.
// Safe for concurrent use (the daemon serves one analysis to many requests).
//
// Where the agent recorded the methods themselves (Seed: the code objects of
// the module classes' forwards, on the machine that ran them), those win.
type Qualnames struct {
	mu     sync.Mutex
	files  map[string]map[string][]pyDef // file -> def name -> defs; nil: unreadable
	seeded map[string][]Method
	paths  map[string][]string // qualified name -> module paths of its instances
}

// Seed adds methods the agent recorded; local maps their recorded files to
// the names frames carry here (PathMap.Map).
func (q *Qualnames) Seed(methods []Method, local func(string) string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seeded == nil {
		q.seeded = map[string][]Method{}
	}
	if q.paths == nil {
		q.paths = map[string][]string{}
	}
	for _, m := range methods {
		f := local(m.File)
		q.seeded[f] = append(q.seeded[f], m)
		q.paths[m.Qual] = append(q.paths[m.Qual], m.Modules...)
	}
}

// Modules returns the module paths whose forward is the method qual, as the
// agent recorded them (none without a recording).
func (q *Qualnames) Modules(qual string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.paths[qual]
}

// seededOf finds a recorded method named fn whose lines hold line.
func (q *Qualnames) seededOf(file string, line int, fn string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.seeded[file] {
		if m.First <= line && line <= m.Last && strings.HasSuffix(m.Qual, "."+fn) {
			return m.Qual
		}
	}
	return ""
}

// pyDef is one def statement and the classes around it, outermost first.
type pyDef struct {
	line    int
	name    string
	classes string // "Outer.Inner", "" for a module-level function
}

// Source files larger than this, and more files than maxQualFiles, are not read.
const (
	maxQualSource = 8 << 20
	maxQualFiles  = 4096
)

// Of returns "Class.fn" for the def named fn that encloses line in file, or
// "" when the file cannot be read or fn is not a method there.
func (q *Qualnames) Of(file string, line int, fn string) string {
	if fn == "" || strings.HasPrefix(fn, "<") || !strings.HasSuffix(file, ".py") {
		return "" // only Python sources are read: a snapshot names files, it does not choose what is opened
	}
	if s := q.seededOf(file, line, fn); s != "" {
		return s
	}
	defs := q.defs(file)[fn]
	var best *pyDef
	for i := range defs {
		d := &defs[i]
		if d.line <= line && (best == nil || d.line > best.line) {
			best = d
		}
	}
	if best == nil || best.classes == "" {
		return ""
	}
	return best.classes + "." + fn
}

// defs reads a file's defs by name, once.
func (q *Qualnames) defs(file string) map[string][]pyDef {
	q.mu.Lock()
	defer q.mu.Unlock()
	if d, ok := q.files[file]; ok {
		return d
	}
	if q.files == nil {
		q.files = map[string]map[string][]pyDef{}
	}
	var byName map[string][]pyDef
	if len(q.files) < maxQualFiles {
		if st, err := os.Stat(file); err == nil && st.Mode().IsRegular() && st.Size() <= maxQualSource {
			if src, err := os.ReadFile(file); err == nil {
				byName = map[string][]pyDef{}
				for _, d := range ParsePythonDefs(src) {
					byName[d.name] = append(byName[d.name], d)
				}
			}
		}
	}
	q.files[file] = byName
	return byName
}

// ParsePythonDefs lists the def statements of a Python source with the
// classes that enclose each. It reads indentation only: lines inside
// brackets or triple-quoted strings do not open or close blocks.
func ParsePythonDefs(src []byte) []pyDef {
	var (
		out    []pyDef
		stack  []pyScope
		depth  int    // open brackets carried from earlier lines
		quote  string // the open triple quote, if any
		lineNo int
	)
	for len(src) > 0 {
		raw, rest, _ := bytes.Cut(src, []byte{'\n'})
		src, lineNo = rest, lineNo+1
		text := string(raw)
		startsFree := depth == 0 && quote == ""
		depth, quote = scanLine(text, depth, quote)
		body := strings.TrimLeft(text, " \t")
		if !startsFree || body == "" || body[0] == '#' {
			continue
		}
		indent := len(text) - len(body)
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		name, isClass, ok := blockHead(body)
		if !ok {
			continue
		}
		sc := pyScope{indent: indent}
		if isClass {
			sc.class = name
		} else {
			out = append(out, pyDef{line: lineNo, name: name, classes: enclosingClasses(stack)})
		}
		stack = append(stack, sc)
	}
	return out
}

// enclosingClasses is the chain of classes directly around a def: a def
// inside another def is a local function, not a method.
func enclosingClasses(stack []pyScope) string {
	var names []string
	for i := len(stack) - 1; i >= 0 && stack[i].class != ""; i-- {
		names = append([]string{stack[i].class}, names...)
	}
	return strings.Join(names, ".")
}

// pyScope is an open class or def block.
type pyScope struct {
	indent int
	class  string // "" for a def
}

// blockHead reads "class NAME" or "[async] def NAME" at the start of a line.
func blockHead(body string) (name string, isClass, ok bool) {
	switch {
	case strings.HasPrefix(body, "class "):
		body, isClass = body[6:], true
	case strings.HasPrefix(body, "def "):
		body = body[4:]
	case strings.HasPrefix(body, "async def "):
		body = body[10:]
	default:
		return "", false, false
	}
	body = strings.TrimLeft(body, " \t")
	end := 0
	for end < len(body) && (body[end] == '_' || body[end] >= '0' && body[end] <= '9' ||
		body[end] >= 'a' && body[end] <= 'z' || body[end] >= 'A' && body[end] <= 'Z' || body[end] >= 0x80) {
		end++
	}
	if end == 0 {
		return "", false, false
	}
	return body[:end], isClass, true
}

// scanLine follows brackets and strings through one line: the bracket depth
// and the open triple quote at its end. A comment ends the line.
func scanLine(s string, depth int, quote string) (int, string) {
	for i := 0; i < len(s); i++ {
		if quote != "" {
			if strings.HasPrefix(s[i:], quote) {
				i += len(quote) - 1
				quote = ""
			} else if s[i] == '\\' {
				i++
			}
			continue
		}
		switch c := s[i]; c {
		case '#':
			return depth, ""
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth = max(0, depth-1)
		case '"', '\'':
			q := string(c)
			if strings.HasPrefix(s[i:], q+q+q) {
				q = q + q + q
			}
			i += len(q) - 1
			if len(q) == 3 {
				quote = q
				continue
			}
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return depth, quote
}
