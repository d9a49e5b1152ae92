package gpuphase

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ReadFile reads a counter recording: `nvidia-smi dmon` text (any -s
// selection that includes the columns used; with or without -o T / -o DT),
// JSON lines from `vramscope counters --json`, or a counters.series result.
// totalMiB, when > 0, is the device memory for dmon text, which lacks it.
func ReadFile(path string, totalMiB float64) ([]Sample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	trim := bytes.TrimSpace(b)
	var ss []Sample
	switch {
	case len(trim) == 0:
		return nil, fmt.Errorf("%s: empty", path)
	case trim[0] == '#':
		ss, err = readDmon(bytes.NewReader(b), totalMiB)
	case trim[0] == '{':
		ss, err = readJSON(b)
	default:
		return nil, fmt.Errorf("%s: neither nvidia-smi dmon output (a # header) nor vramscope JSON", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("%s: no samples", path)
	}
	return ss, nil
}

// jsonSample is daemon/counters.DeviceSample's wire form.
type jsonSample struct {
	TimeMS   int64    `json:"time_ms"`
	Device   int      `json:"device"`
	MemUsed  *float64 `json:"mem_used_bytes"`
	MemTotal *float64 `json:"mem_total_bytes"`
	UtilGPU  *float64 `json:"util_gpu_pct"`
	UtilMem  *float64 `json:"util_mem_pct"`
	TxKBps   *float64 `json:"pcie_tx_kbps"`
	RxKBps   *float64 `json:"pcie_rx_kbps"`
	PowerMW  *float64 `json:"power_mw"`
	GPM      *struct {
		SMActive *float64 `json:"sm_active_pct"`
		DRAMBW   *float64 `json:"dram_bw_util_pct"`
	} `json:"gpm"`
}

func (j jsonSample) sample() Sample {
	s := blank(j.TimeMS, j.Device)
	set := func(dst *float64, v *float64, scale float64) {
		if v != nil {
			*dst = *v * scale
		}
	}
	set(&s.UtilGPU, j.UtilGPU, 1)
	set(&s.UtilMem, j.UtilMem, 1)
	set(&s.PowerW, j.PowerMW, 1e-3)
	set(&s.RxMBps, j.RxKBps, 1024.0/1e6)
	set(&s.TxMBps, j.TxKBps, 1024.0/1e6)
	set(&s.MemUsedMiB, j.MemUsed, 1.0/(1<<20))
	set(&s.MemTotalMiB, j.MemTotal, 1.0/(1<<20))
	if j.GPM != nil {
		set(&s.SMActive, j.GPM.SMActive, 1)
		set(&s.DRAMBW, j.GPM.DRAMBW, 1)
	}
	return s
}

func readJSON(b []byte) ([]Sample, error) {
	var series struct {
		Samples []jsonSample `json:"samples"`
	}
	if json.Unmarshal(b, &series) == nil && series.Samples != nil {
		out := make([]Sample, len(series.Samples))
		for i, j := range series.Samples {
			out[i] = j.sample()
		}
		return out, nil
	}
	var out []Sample
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec struct {
			Sample *jsonSample `json:"sample"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if rec.Sample != nil {
			out = append(out, rec.Sample.sample())
		}
	}
	return out, sc.Err()
}

// readDmon parses nvidia-smi dmon's table by its header names.
func readDmon(r io.Reader, totalMiB float64) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	var cols []string
	var out []Sample
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			if len(f) > 0 && (f[0] == "gpu" || f[0] == "Date" || f[0] == "Time") {
				cols = f
			}
			continue
		}
		if cols == nil {
			return nil, fmt.Errorf("line %d: data before the dmon header", n)
		}
		f := strings.Fields(line)
		if len(f) != len(cols) {
			return nil, fmt.Errorf("line %d: %d fields under a header of %d", n, len(f), len(cols))
		}
		s, err := dmonRow(cols, f, day, len(out), totalMiB)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func dmonRow(cols, f []string, day time.Time, index int, totalMiB float64) (Sample, error) {
	s := blank(int64(index)*1000, 0)
	var date, clock string
	for i, c := range cols {
		v := f[i]
		num := func() float64 {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nan() // "-": no data
			}
			return x
		}
		switch c {
		case "Date":
			date = v
		case "Time":
			clock = v
		case "gpu":
			d, err := strconv.Atoi(v)
			if err != nil {
				return s, fmt.Errorf("gpu index %q", v)
			}
			s.Device = d
		case "sm":
			s.UtilGPU = num()
		case "mem":
			s.UtilMem = num()
		case "pwr":
			s.PowerW = num()
		case "fb":
			s.MemUsedMiB = num()
		case "rxpci":
			s.RxMBps = num()
		case "txpci":
			s.TxMBps = num()
		}
	}
	if totalMiB > 0 {
		s.MemTotalMiB = totalMiB
	}
	if clock != "" {
		layout, value := "15:04:05", clock
		base := day
		if date != "" {
			layout, value, base = "20060102 15:04:05", date+" "+clock, time.Time{}
		}
		t, err := time.Parse(layout, value)
		if err != nil {
			return s, fmt.Errorf("time %q: %v", value, err)
		}
		if date == "" {
			t = base.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second)
		}
		s.TimeMS = t.UnixMilli()
	}
	return s, nil
}
