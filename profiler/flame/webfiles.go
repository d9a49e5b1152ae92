// webfiles.go reads web/files.json, the one list of the shared front-end
// core's files in load order, and joins each part of it for the CLI's page.
// The VS Code webview and the notebook widget read the same list, so a new
// file is added to the core in one place.

package flame

import (
	"embed"
	"encoding/json"
	"fmt"
	"strings"
)

// All of web/*.js and web/*.css are embedded; TestWebFilesListsEveryAsset
// checks that files.json names each of them.
//
//go:embed web/files.json web/*.js web/*.css web/page.html
var webFS embed.FS

// webFile is one entry of web/files.json.
type webFile struct {
	File   string `json:"file"`
	Global string `json:"global,omitempty"` // what a script defines on globalThis
	Part   string `json:"part"`             // "flame", "page" or "report"
}

// webList is web/files.json: the core's scripts and styles in load order.
type webList struct {
	Scripts []webFile `json:"scripts"`
	Styles  []webFile `json:"styles"`
}

var webFiles = mustList()

func mustList() webList {
	var l webList
	if err := json.Unmarshal([]byte(mustRead("web/files.json")), &l); err != nil {
		panic(fmt.Sprintf("flame: web/files.json: %v", err)) // embedded at build time: tests catch it
	}
	return l
}

func mustRead(name string) string {
	b, err := webFS.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	return string(b)
}

// joinPart is the text of the files of one part, in order, a newline between them.
func joinPart(files []webFile, part string) string {
	var texts []string
	for _, f := range files {
		if f.Part == part {
			texts = append(texts, mustRead("web/"+f.File))
		}
	}
	return strings.Join(texts, "\n")
}
