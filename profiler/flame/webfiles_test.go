package flame

import (
	"io/fs"
	"path"
	"sort"
	"testing"
)

// TestWebFilesListsEveryAsset keeps web/files.json the one list of the core:
// every script and style in web/ is in it once, in a known part, and every
// entry is a file there. A file left out would be missing from every host.
func TestWebFilesListsEveryAsset(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range append(append([]webFile{}, webFiles.Scripts...), webFiles.Styles...) {
		if listed[f.File] {
			t.Errorf("files.json lists %s twice", f.File)
		}
		listed[f.File] = true
		if f.Part != "flame" && f.Part != "page" && f.Part != "report" {
			t.Errorf("files.json: %s has part %q, want flame, page or report", f.File, f.Part)
		}
		if _, err := fs.Stat(webFS, "web/"+f.File); err != nil {
			t.Errorf("files.json lists %s, which web/ lacks", f.File)
		}
	}
	for _, s := range webFiles.Scripts {
		if path.Ext(s.File) != ".js" || s.Global == "" {
			t.Errorf("files.json: script %+v needs a .js file and the global it defines", s)
		}
	}
	for _, s := range webFiles.Styles {
		if path.Ext(s.File) != ".css" {
			t.Errorf("files.json: style %s is not a .css file", s.File)
		}
	}
	var unlisted []string
	for _, pattern := range []string{"web/*.js", "web/*.css"} {
		names, _ := fs.Glob(webFS, pattern)
		for _, n := range names {
			if !listed[path.Base(n)] {
				unlisted = append(unlisted, n)
			}
		}
	}
	sort.Strings(unlisted)
	if len(unlisted) > 0 {
		t.Errorf("web/files.json does not list %v: no host would load them", unlisted)
	}
}
