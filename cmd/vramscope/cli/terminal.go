package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// terminal is how the text outputs (analyze, diff, ps, error messages)
// reach the user's terminal. The strings they print come from snapshots and
// agents (frame and file names, argv), which anyone can write: an escape
// sequence in one could clear the screen, hide lines, retitle the window or
// make a link lie. terminal shows every control character as its Go escape
// (\x1b, \u009b) and Unicode's direction overrides likewise, so the text
// reads as it is; newlines and tabs pass. JSON, HTML and binary outputs do
// not go through it: they are unchanged.
func terminal(w io.Writer) io.Writer { return termWriter{w} }

type termWriter struct{ w io.Writer }

// Write sanitizes p. The writers print with fmt, one whole line or field a
// call, so a character split across two calls does not arise; were one
// split, its bytes would show escaped rather than pass raw.
func (t termWriter) Write(p []byte) (int, error) {
	s := string(p)
	if !needsEscape(s) {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, termSafe(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// termSafe is s with what a terminal would act on escaped.
func termSafe(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r) || r == utf8.RuneError && n == 1 {
			return true
		}
		i += n
	}
	return false
}

// unsafeRune: C0 controls but newline and tab, DEL, the C1 controls (U+009B
// is a CSI on its own), and the bidirectional overrides and isolates that
// reorder what follows them ("Trojan Source").
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
