package pickle

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// refusedOps is every opcode that would import, call or reach outside the
// data, with a minimal pickle holding it after a harmless prefix.
var refusedOps = []struct {
	name string
	op   byte
	arg  string // what follows the opcode (so Scan sees a well-formed opcode)
}{
	{"GLOBAL", 'c', "os\nsystem\n"},
	{"STACK_GLOBAL", 0x93, ""},
	{"REDUCE", 'R', ""},
	{"BUILD", 'b', ""},
	{"INST", 'i', "os\nsystem\n"},
	{"OBJ", 'o', ""},
	{"NEWOBJ", 0x81, ""},
	{"NEWOBJ_EX", 0x92, ""},
	{"EXT1", 0x82, "\x01"},
	{"EXT2", 0x83, "\x01\x00"},
	{"EXT4", 0x84, "\x01\x00\x00\x00"},
	{"PERSID", 'P', "0\n"},
	{"BINPERSID", 'Q', ""},
	{"NEXT_BUFFER", 0x97, ""},
	{"READONLY_BUFFER", 0x98, ""},
}

// TestRefusedOpcodes checks each refused opcode in a tiny pickle: the error is
// a *Error saying "refusing opcode NAME" at the opcode's offset, in both the
// scan and (for defence in depth) the decoding pass on its own.
func TestRefusedOpcodes(t *testing.T) {
	prefix := "\x80\x05(\x8c\x02osX\x06\x00\x00\x00system" // values a call would use
	for _, c := range refusedOps {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(prefix + string([]byte{c.op}) + c.arg + ".")
			_, err := decodeNoPanic(t, in, DefaultLimits)
			pe := pickleErr(t, err, "refusing opcode "+c.name+":")
			if pe.Offset != int64(len(prefix)) {
				t.Fatalf("refused at offset %d, want %d (the opcode)", pe.Offset, len(prefix))
			}

			// The decoding pass refuses too, even with a plan from other bytes.
			plan, err := Scan(bytes.NewReader([]byte("\x80\x02N.")), 4, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Machine panicked: %v", r)
					}
				}()
				_, err = NewMachine(bytes.NewReader(in), int64(len(in)), plan, DefaultLimits).Run()
			}()
			pe = pickleErr(t, err, "refusing opcode "+c.name+":")
			if pe.Offset != int64(len(prefix)) {
				t.Fatalf("Machine refused at offset %d, want %d", pe.Offset, len(prefix))
			}
		})
	}
}

// TestRefusedOpcodeLate puts a refused opcode after a large valid prefix: the
// scan must reject the file before anything is built.
func TestRefusedOpcodeLate(t *testing.T) {
	var b strings.Builder
	b.WriteString("\x80\x04](")
	for i := 0; i < 100000; i++ {
		b.WriteString("\x8c\x05hello")
	}
	b.WriteString("e")
	at := b.Len()
	b.WriteString("\x8c\x02os\x8c\x06system\x93.")
	_, err := decodeNoPanic(t, []byte(b.String()), DefaultLimits)
	pe := pickleErr(t, err, "refusing opcode STACK_GLOBAL:")
	if want := int64(at + 4 + 8); pe.Offset != want {
		t.Fatalf("offset %d, want %d", pe.Offset, want)
	}
}

// TestRefusedPythonPickles decodes pickles CPython wrote for objects that are
// not plain data (testdata/refused, see gen_cases.py): class instances,
// OrderedDict, datetime, __getnewargs_ex__, and a __reduce__ that would run
// os.system("touch vramscope_pwned"). Each must be refused at its first
// import, and nothing may run.
func TestRefusedPythonPickles(t *testing.T) {
	manifest := strings.Split(strings.TrimSpace(string(readFile(t, filepath.Join("testdata", "refused", "first_refused.tsv")))), "\n")
	files, _ := filepath.Glob(filepath.Join("testdata", "refused", "*.pickle"))
	if len(files) < 15 || len(files) != len(manifest) {
		t.Fatalf("%d files under testdata/refused, %d in first_refused.tsv", len(files), len(manifest))
	}
	for _, line := range manifest {
		f := strings.Split(line, "\t")
		base, name := f[0], f[1]
		at, _ := strconv.ParseInt(f[2], 10, 64)
		t.Run(base, func(t *testing.T) {
			b := readFile(t, filepath.Join("testdata", "refused", base))
			_, err := decodeNoPanic(t, b, DefaultLimits)
			pe := pickleErr(t, err, "refusing opcode "+name+":")
			if pe.Offset != at {
				t.Fatalf("refused at offset %d, pickletools puts the first %s at %d", pe.Offset, name, at)
			}
		})
	}
	if _, err := os.Stat("vramscope_pwned"); err == nil {
		os.Remove("vramscope_pwned")
		t.Fatal("decoding ran os.system: vramscope_pwned exists")
	}
}
