package flame

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// WriteCollapsed writes the tree as Brendan Gregg's collapsed stacks: one line
// per leaf path, frames root first joined by ';', then the self weight.
func WriteCollapsed(w io.Writer, t *Tree) error {
	bw := bufio.NewWriter(w)
	var err error
	t.Walk(func(path []*Node, n *Node) {
		if n.Self <= 0 || err != nil || len(path) == 0 {
			return
		}
		names := make([]string, 0, len(path))
		for _, p := range path[1:] {
			names = append(names, frameLabel(p))
		}
		names = append(names, frameLabel(n))
		_, err = fmt.Fprintf(bw, "%s %d\n", strings.Join(names, ";"), n.Self)
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// frameLabel is "function (file.py:12)", with ';' removed so lines stay parseable.
func frameLabel(n *Node) string {
	s := n.Name
	if n.File != "" {
		s = fmt.Sprintf("%s (%s:%d)", n.Name, filepath.Base(n.File), n.Line)
	}
	return strings.ReplaceAll(s, ";", ",")
}
