package profiler

import (
	"fmt"
	"strconv"
)

// The numbers as every front end prints them. The views print them again in
// JavaScript (web/view.js), the VS Code extension in TypeScript (format.ts)
// and the notebook in Python (_report.py); all four copies answer the shared
// vectors in flame/testdata/format_vectors.json.

var byteUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatBytes writes a byte count in binary units with two decimals
// ("1.53 GiB"); an exact tie rounds to even ("1.12 KiB" for 1152 bytes), and
// what would read "1024.00" of a unit reads 1.00 of the next.
func FormatBytes(n int64) string {
	sign, v := "", float64(n)
	if v < 0 {
		sign, v = "-", -v
	}
	u := 0
	for v >= 1024 && u < len(byteUnits)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%s%.0f B", sign, v)
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	if s == "1024.00" && u < len(byteUnits)-1 {
		s, u = "1.00", u+1
	}
	return sign + s + " " + byteUnits[u]
}

// FormatCount writes 123456 as "123,456".
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return sign + string(out)
}
