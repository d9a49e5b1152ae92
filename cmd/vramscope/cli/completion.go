package cli

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// runCompletion prints a completion script for bash, zsh or fish, made from
// the commands table and each command's flag set.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope completion: usage: vramscope completion bash|zsh|fish")
		return exitInput
	}
	write, ok := map[string]func(io.Writer, []completed){"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}[pos[0]]
	if !ok {
		fmt.Fprintf(stderr, "vramscope completion: no completion for shell %q (bash, zsh or fish)\n", pos[0])
		return exitInput
	}
	write(stdout, completions())
	return exitOK
}

// completed is what a shell completes for one command.
type completed struct {
	name, what string
	flags      []completedFlag
	words      []string // fixed positional words (shells, command names)
}

type completedFlag struct {
	name, usage string
	takesValue  bool
	values      []string // the values it takes, where they are a fixed set (else files)
}

// flagValues are the fixed values of flags, by command and flag: a shell
// offers these after the flag instead of file names.
var flagValues = map[string][]string{
	"flame --format":   {"html", "json", "collapsed", "pprof"},
	"flame --weight":   {"peak", "alloc", "current"},
	"analyze --bundle": {"peak", "alloc", "current"},
	"lsp --daemon":     {"auto", "connect", "off"},
}

func completions() []completed {
	var out []completed
	for _, c := range commands {
		cc := completed{name: c.name}
		_, cc.what, _ = strings.Cut(c.usage, "  ")
		switch c.name {
		case "completion":
			cc.words = []string{"bash", "zsh", "fish"}
		case "help":
			for _, o := range commands {
				cc.words = append(cc.words, o.name)
			}
		}
		if c.run != nil {
			if fs := flagsOf(c); fs != nil {
				fs.VisitAll(func(f *flag.Flag) {
					b, isBool := f.Value.(interface{ IsBoolFlag() bool })
					cc.flags = append(cc.flags, completedFlag{f.Name, f.Usage, !(isBool && b.IsBoolFlag()), flagValues[c.name+" --"+f.Name]})
				})
			}
		}
		sort.Slice(cc.flags, func(i, j int) bool { return cc.flags[i].name < cc.flags[j].name })
		out = append(out, cc)
	}
	return out
}

func bashCompletion(w io.Writer, cs []completed) {
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, "# bash completion for vramscope: source <(vramscope completion bash)\n_vramscope() {\n")
	fmt.Fprintf(w, "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=\"\" vals=\"\"\n")
	fmt.Fprintf(w, "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    COMPREPLY=($(compgen -W '%s --help --version' -- \"$cur\"))\n    return\n  fi\n", strings.Join(names, " "))
	fmt.Fprintf(w, "  case ${COMP_WORDS[1]} in\n")
	for _, c := range cs {
		var fl []string
		for _, f := range c.flags {
			fl = append(fl, "--"+f.name)
		}
		fl = append(fl, "--help")
		var vals []string
		for _, f := range c.flags {
			if len(f.values) > 0 {
				vals = append(vals, fmt.Sprintf("--%s|-%s) vals='%s' ;;", f.name, f.name, strings.Join(f.values, " ")))
			}
		}
		valCase := ""
		if len(vals) > 0 {
			valCase = "; case $prev in " + strings.Join(vals, " ") + " esac"
		}
		fmt.Fprintf(w, "    %s) words='%s'; flags='%s'%s ;;\n", c.name, strings.Join(c.words, " "), strings.Join(fl, " "), valCase)
	}
	fmt.Fprintf(w, "  esac\n")
	fmt.Fprintf(w, "  if [ -n \"$vals\" ]; then COMPREPLY=($(compgen -W \"$vals\" -- \"$cur\")); return; fi\n")
	fmt.Fprintf(w, "  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n")
	fmt.Fprintf(w, "  elif [ -n \"$words\" ]; then COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n")
	fmt.Fprintf(w, "  else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n}\ncomplete -o filenames -F _vramscope vramscope\n")
}

func zshCompletion(w io.Writer, cs []completed) {
	fmt.Fprintf(w, "#compdef vramscope\n# zsh completion for vramscope: put in a directory on $fpath as _vramscope, or source <(vramscope completion zsh)\n")
	fmt.Fprintf(w, "_vramscope() {\n  local -a cmds\n  cmds=(\n")
	for _, c := range cs {
		fmt.Fprintf(w, "    %s\n", zshQuote(c.name+":"+c.what))
	}
	fmt.Fprintf(w, "  )\n  if (( CURRENT == 2 )); then\n    _describe command cmds\n    return\n  fi\n  case $words[2] in\n")
	for _, c := range cs {
		var specs []string
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + zshDesc(f.usage) + "]"
			if len(f.values) > 0 {
				spec += ":value:(" + strings.Join(f.values, " ") + ")"
			} else if f.takesValue {
				spec += ":value:_files"
			}
			specs = append(specs, zshQuote(spec))
		}
		if len(c.words) > 0 {
			specs = append(specs, zshQuote("1:word:("+strings.Join(c.words, " ")+")"))
		} else {
			specs = append(specs, zshQuote("*:file:_files"))
		}
		fmt.Fprintf(w, "    %s) _arguments -s %s ;;\n", c.name, strings.Join(specs, " "))
	}
	fmt.Fprintf(w, "  esac\n}\nif [ \"$funcstack[1]\" = \"_vramscope\" ]; then\n  _vramscope \"$@\"\nelse\n  compdef _vramscope vramscope\nfi\n")
}

func fishCompletion(w io.Writer, cs []completed) {
	fmt.Fprintf(w, "# fish completion for vramscope: vramscope completion fish > ~/.config/fish/completions/vramscope.fish\n")
	fmt.Fprintf(w, "complete -c vramscope -f -n __fish_use_subcommand -l version -d 'print the version'\n")
	for _, c := range cs {
		fmt.Fprintf(w, "complete -c vramscope -f -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.what))
		cond := "'__fish_seen_subcommand_from " + c.name + "'"
		for _, f := range c.flags {
			r := ""
			if len(f.values) > 0 {
				r = " -x -a " + fishQuote(strings.Join(f.values, " ")) // exclusive: these values, no files
			} else if f.takesValue {
				r = " -r"
			}
			fmt.Fprintf(w, "complete -c vramscope -n %s -l %s%s -d %s\n", cond, f.name, r, fishQuote(f.usage))
		}
		if len(c.words) > 0 {
			fmt.Fprintf(w, "complete -c vramscope -f -n %s -a %s\n", cond, fishQuote(strings.Join(c.words, " ")))
		}
	}
}

func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// zshDesc keeps an _arguments description from ending its brackets early.
func zshDesc(s string) string {
	return strings.NewReplacer("[", "(", "]", ")", ":", " ", "\n", " ").Replace(s)
}
