// Package trace reads workload traces: CSV files of `minute,value` rows, one row per step, the
// format of the project's shared trace collection. Three CC-BY-4.0 traces are embedded so that
// the backtest and the core tests run with no download (see data/ATTRIBUTION.md).
package trace

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

//go:embed data/*.csv data/ATTRIBUTION.md
var embedded embed.FS

// Trace is one demand series.
type Trace struct {
	// Name is the file name without directory and extension.
	Name string `json:"name"`
	// Class is periodic, smooth or bursty where known.
	Class string `json:"class,omitempty"`
	// StepMinutes is the spacing of the minute column (1 or 5 in the shared traces).
	StepMinutes int `json:"step_minutes"`
	// Values are the samples, oldest first.
	Values []float64 `json:"-"`
}

// classes of the embedded traces, from the shared collection's index.csv.
var classes = map[string]string{
	"azure_vm2019_total_cpu_5min":          "periodic",
	"google2019_cell_avg_cpu_5min":         "smooth",
	"azure_vm2017_vm1663289_avgcpu_5min":   "bursty",
	"azure_vm2017_vm942980_avgcpu_5min":    "periodic",
	"azure_vm2017_vm1471895_avgcpu_5min":   "smooth",
	"azure_vm2017_vm1099406_avgcpu_5min":   "bursty",
	"nasa_http_1995-07-01_to_07-27_rpm":    "periodic",
	"wc98_1998-05-04_to_05-31_rpm":         "periodic",
	"wc98_1998-07-01_to_07-02_nomatch_rpm": "smooth",
	"wc98_1998-06-22_to_06-28_rpm":         "bursty",
}

// Embedded returns the traces shipped inside the binary, sorted by name.
func Embedded() ([]Trace, error) {
	entries, err := fs.Glob(embedded, "data/*.csv")
	if err != nil {
		return nil, err
	}
	sort.Strings(entries)
	out := make([]Trace, 0, len(entries))
	for _, e := range entries {
		f, err := embedded.Open(e)
		if err != nil {
			return nil, err
		}
		t, err := Parse(f, "embedded:"+path.Base(e))
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Attribution returns the sources and licences of the embedded traces.
func Attribution() string {
	b, _ := embedded.ReadFile("data/ATTRIBUTION.md")
	return string(b)
}

// LoadFile reads a trace from a CSV file.
func LoadFile(name string) (Trace, error) {
	f, err := os.Open(name)
	if err != nil {
		return Trace{}, err
	}
	defer f.Close()
	return Parse(f, name)
}

// Parse reads `minute,value` rows. A header line is optional. Every error names the source and
// the line: a value that is not a number, NaN or infinite, negative, a minute column that does
// not advance by a constant step, or a file with no rows.
func Parse(r io.Reader, source string) (Trace, error) {
	base := filepath.Base(strings.TrimPrefix(source, "embedded:"))
	name := strings.TrimSuffix(base, filepath.Ext(base))
	t := Trace{Name: name, Class: classes[name]}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	var prevMinute, step int64 = -1, 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) != 2 {
			return Trace{}, fmt.Errorf("%s:%d: want 2 comma-separated fields (minute,value), got %d", source, line, len(fields))
		}
		if len(t.Values) == 0 && prevMinute < 0 {
			if _, err := strconv.ParseFloat(strings.TrimSpace(fields[1]), 64); err != nil {
				if line == 1 || isHeader(fields) {
					continue // header
				}
			}
		}
		minute, err := strconv.ParseInt(strings.TrimSpace(fields[0]), 10, 64)
		if err != nil {
			return Trace{}, fmt.Errorf("%s:%d: minute %q is not an integer", source, line, fields[0])
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(fields[1]), 64)
		if err != nil {
			return Trace{}, fmt.Errorf("%s:%d: value %q is not a number", source, line, fields[1])
		}
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return Trace{}, fmt.Errorf("%s:%d: value is %v; traces must be finite", source, line, v)
		case v < 0:
			return Trace{}, fmt.Errorf("%s:%d: value %v is negative; demand cannot be", source, line, v)
		}
		if prevMinute >= 0 {
			d := minute - prevMinute
			if d <= 0 {
				return Trace{}, fmt.Errorf("%s:%d: minute %d does not advance past %d", source, line, minute, prevMinute)
			}
			if step == 0 {
				step = d
			} else if d != step {
				return Trace{}, fmt.Errorf("%s:%d: minute %d breaks the step of %d minutes (a gap or a duplicate)", source, line, minute, step)
			}
		}
		prevMinute = minute
		t.Values = append(t.Values, v)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("%s:%d: %w", source, line, err)
	}
	if len(t.Values) == 0 {
		return Trace{}, fmt.Errorf("%s: no data rows", source)
	}
	if step == 0 {
		step = 1
	}
	t.StepMinutes = int(step)
	return t, nil
}

func isHeader(fields []string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(fields[0]), 64)
	return err != nil
}
