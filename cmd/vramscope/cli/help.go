package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
)

// runHelp prints the command list, or one command's help, to stdout.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || asksHelp(args[:1]) { // help --help: the help there is
		usage(stdout)
		return exitOK
	}
	c, ok := lookup(args[0])
	if !ok {
		if args[0] == "help" {
			usage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "vramscope help: unknown command %q\n", args[0])
		usage(stderr)
		return exitInput
	}
	return commandHelp(c, stdout)
}

// asksHelp reports whether a command's own arguments (those before "--")
// ask for its help.
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func commandHelp(c command, stdout io.Writer) int {
	writeCommandHelp(stdout, c.name, flagsOf(c))
	return exitOK
}

// writeCommandHelp is a command's usage line (which names its positional
// arguments), what it does, and its flags with their defaults.
func writeCommandHelp(w io.Writer, name string, fs *flag.FlagSet) {
	line := name
	for _, c := range commands {
		if c.name == name {
			line = c.usage
		}
	}
	synopsis, what, _ := strings.Cut(line, "  ")
	fmt.Fprintf(w, "usage: vramscope %s\n", synopsis)
	if what != "" {
		fmt.Fprintf(w, "\n%s\n", what)
	}
	if fs == nil || !hasFlags(fs) {
		return
	}
	fmt.Fprintln(w, "\nflags (-flag and --flag are the same):")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// capturing, while flagsOf runs a command, makes parse hand over the
// command's flag set and return before the command does anything.
var (
	capturing *capture
	captureMu sync.Mutex
)

type capture struct{ fs *flag.FlagSet }

// flagsOf is the flag set a command parses (nil for one without flags), read
// from the command itself so that help and completions never drift from it.
func flagsOf(c command) *flag.FlagSet {
	captureMu.Lock()
	defer captureMu.Unlock()
	capturing = &capture{}
	defer func() { capturing = nil }()
	c.run(nil, io.Discard, io.Discard)
	return capturing.fs
}
