// Package trace reads workload traces: CSV files of `minute,value` rows (or, under a header
// `minute,<metric1>,<metric2>,…`, one value per metric), one row per step, the
// format of the project's shared trace collection. A trace's class (periodic, smooth, bursty)
// comes from the collection's index.csv beside the files. Three CC-BY-4.0 traces are embedded,
// with their rows of that index, so that the backtest and the core tests run with no download
// (see data/ATTRIBUTION.md).
package trace

import (
	"bufio"
	"embed"
	"encoding/csv"
	"errors"
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
	"sync"
)

//go:embed data/*.csv data/ATTRIBUTION.md
var embedded embed.FS

// IndexFile is the name of a trace collection's index: one row per trace file with its class
// (`file,class,step_minutes,...`, the header naming the columns), beside the traces.
const IndexFile = "index.csv"

// Trace is one demand series.
type Trace struct {
	// Name is the file name without directory and extension.
	Name string `json:"name"`
	// Class is periodic, smooth or bursty where known.
	Class string `json:"class,omitempty"`
	// StepMinutes is the spacing of the minute column (1 or 5 in the shared traces).
	StepMinutes int `json:"step_minutes"`
	// Values are the samples, oldest first (the first metric's, in a trace with several).
	Values []float64 `json:"-"`
	// Metrics names the metrics of a trace with several (its header minute,<metric1>,<metric2>,…;
	// nil for a one-metric trace), and Columns holds each one's samples in that order:
	// Columns[0] is Values.
	Metrics []string    `json:"metrics,omitempty"`
	Columns [][]float64 `json:"-"`
}

// Entry is one row of a collection's index.
type Entry struct {
	// File is the trace's file name (no directory).
	File string
	// Class is periodic, smooth or bursty.
	Class string
	// StepMinutes is the sample period the index states (0 when the column is absent).
	StepMinutes int
}

// Index maps a trace's file name to its row of the collection's index.csv.
type Index map[string]Entry

// ReadIndex parses an index.csv: a header naming at least the columns file and class (and
// optionally step_minutes), then one row per trace; quoted fields may hold commas. Errors name
// the source and the line.
func ReadIndex(r io.Reader, source string) (Index, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: no header: %w", source, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	fi, okF := col["file"]
	ci, okC := col["class"]
	if !okF || !okC {
		return nil, fmt.Errorf("%s:1: header %q lacks the columns file and class", source, strings.Join(head, ","))
	}
	si, okS := col["step_minutes"]
	idx := Index{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return idx, nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, line, err)
		}
		if len(rec) <= max(fi, ci) {
			return nil, fmt.Errorf("%s:%d: %d fields, want at least %d", source, line, len(rec), max(fi, ci)+1)
		}
		e := Entry{File: strings.TrimSpace(rec[fi]), Class: strings.TrimSpace(rec[ci])}
		switch e.Class {
		case "periodic", "smooth", "bursty":
		default:
			return nil, fmt.Errorf("%s:%d: class %q of %s is not periodic, smooth or bursty", source, line, e.Class, e.File)
		}
		if okS && si < len(rec) && strings.TrimSpace(rec[si]) != "" {
			n, err := strconv.Atoi(strings.TrimSpace(rec[si]))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%s:%d: step_minutes %q of %s is not a positive integer", source, line, rec[si], e.File)
			}
			e.StepMinutes = n
		}
		if _, dup := idx[e.File]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", source, line, e.File)
		}
		idx[e.File] = e
	}
}

// embeddedIndex is data/index.csv: the collection's rows for the embedded traces.
var embeddedIndex = func() Index {
	f, err := embedded.Open("data/" + IndexFile)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	idx, err := ReadIndex(f, "embedded:"+IndexFile)
	if err != nil {
		panic(err)
	}
	return idx
}()

// dirIndex caches the index.csv of each directory traces were loaded from (nil: none there).
var dirIndex struct {
	sync.Mutex
	m map[string]Index
}

// LoadIndex reads dir/index.csv; a missing file is no index (nil, nil).
func LoadIndex(dir string) (Index, error) {
	dirIndex.Lock()
	defer dirIndex.Unlock()
	if idx, ok := dirIndex.m[dir]; ok {
		return idx, nil
	}
	name := filepath.Join(dir, IndexFile)
	f, err := os.Open(name)
	var idx Index
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		idx, err = ReadIndex(f, name)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if dirIndex.m == nil {
		dirIndex.m = map[string]Index{}
	}
	dirIndex.m[dir] = idx
	return idx, nil
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
		if path.Base(e) == IndexFile {
			continue
		}
		f, err := embedded.Open(e)
		if err != nil {
			return nil, err
		}
		t, err := Parse(f, "embedded:"+path.Base(e))
		f.Close()
		if err != nil {
			return nil, err
		}
		if err := t.classify(embeddedIndex, path.Base(e), "embedded:"+IndexFile); err != nil {
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

// LoadFile reads a trace from a CSV file. Its class comes from the index.csv of its directory
// (the collection's index; see IndexFile), or, where there is none or it does not list the
// file, from the embedded index when the file is one of the embedded traces. A file whose
// sample period disagrees with its index row is an error.
func LoadFile(name string) (Trace, error) {
	f, err := os.Open(name)
	if err != nil {
		return Trace{}, err
	}
	defer f.Close()
	t, err := Parse(f, name)
	if err != nil {
		return Trace{}, err
	}
	dir := filepath.Dir(name)
	idx, err := LoadIndex(dir)
	if err != nil {
		return Trace{}, err
	}
	base := filepath.Base(name)
	if _, ok := idx[base]; ok {
		return t, t.classify(idx, base, filepath.Join(dir, IndexFile))
	}
	return t, t.classify(embeddedIndex, base, "embedded:"+IndexFile)
}

// classify sets t.Class from idx's row for file, if any, and checks the row's sample period.
func (t *Trace) classify(idx Index, file, source string) error {
	e, ok := idx[file]
	if !ok {
		return nil
	}
	if e.StepMinutes > 0 && e.StepMinutes != t.StepMinutes {
		return fmt.Errorf("%s: %s has a %d-minute step, its index row says %d", source, file, t.StepMinutes, e.StepMinutes)
	}
	t.Class = e.Class
	return nil
}

// Parse reads `minute,value` rows. A header line is optional. Parse leaves Class empty: the
// class is the collection index's (LoadFile, Embedded). Every error names the source and
// the line: a value that is not a number, NaN or infinite, negative, a minute column that does
// not advance by a constant step, or a file with no rows.
//
// A header with more than one value column, `minute,<metric1>,<metric2>,…`, makes a trace with
// several metrics (Trace.Metrics, Trace.Columns): every row then has a value per metric, and an
// error in a value names its column by number and metric too (file.csv:12: column 3 (rps): …).
func Parse(r io.Reader, source string) (Trace, error) {
	base := filepath.Base(strings.TrimPrefix(source, "embedded:"))
	name := strings.TrimSuffix(base, filepath.Ext(base))
	t := Trace{Name: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	g := minuteGrid{prev: -1}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) > 2 && len(t.Values) == 0 && g.prev < 0 && isHeader(fields) {
			return parseMetrics(sc, source, t, fields, line)
		}
		if len(fields) != 2 {
			return Trace{}, fmt.Errorf("%s:%d: want 2 comma-separated fields (minute,value), got %d", source, line, len(fields))
		}
		if len(t.Values) == 0 && g.prev < 0 {
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
		if why := badValue(v); why != "" {
			return Trace{}, fmt.Errorf("%s:%d: %s", source, line, why)
		}
		if why := g.advance(minute); why != "" {
			return Trace{}, fmt.Errorf("%s:%d: minute %s", source, line, why)
		}
		t.Values = append(t.Values, v)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("%s:%d: %w", source, line, err)
	}
	if len(t.Values) == 0 {
		return Trace{}, fmt.Errorf("%s: no data rows", source)
	}
	t.StepMinutes = int(max(g.step, 1))
	return t, nil
}

// badValue says why v cannot be a demand sample ("" when it can).
func badValue(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprintf("value is %v; traces must be finite", v)
	case v < 0:
		return fmt.Sprintf("value %v is negative; demand cannot be", v)
	}
	return ""
}

// minuteGrid checks that a trace's minute column advances by one step: prev is the last minute
// (-1 before the first), step the spacing the first two set (0 before).
type minuteGrid struct{ prev, step int64 }

// advance takes the next minute and says why it breaks the grid ("" when it does not).
func (g *minuteGrid) advance(minute int64) string {
	if g.prev >= 0 {
		d := minute - g.prev
		if d <= 0 {
			return fmt.Sprintf("%d does not advance past %d", minute, g.prev)
		}
		if g.step == 0 {
			g.step = d
		} else if d != g.step {
			return fmt.Sprintf("%d breaks the step of %d minutes (a gap or a duplicate)", minute, g.step)
		}
	}
	g.prev = minute
	return ""
}

// parseMetrics reads the rows of a trace with several metrics after its header (head, on line
// line of sc): minute, then one value per metric, each checked as Parse checks its one value.
func parseMetrics(sc *bufio.Scanner, source string, t Trace, head []string, line int) (Trace, error) {
	if m := strings.TrimSpace(head[0]); !strings.EqualFold(m, "minute") {
		return Trace{}, fmt.Errorf("%s:%d: column 1: header %q, want minute (minute,<metric1>,<metric2>,…)", source, line, m)
	}
	seen := map[string]int{}
	for i, h := range head[1:] {
		h = strings.TrimSpace(h)
		switch _, dup := seen[h]; {
		case h == "":
			return Trace{}, fmt.Errorf("%s:%d: column %d: empty metric name", source, line, i+2)
		case dup:
			return Trace{}, fmt.Errorf("%s:%d: column %d: metric %q named twice (column %d)", source, line, i+2, h, seen[h])
		}
		seen[h] = i + 2
		t.Metrics = append(t.Metrics, h)
	}
	t.Columns = make([][]float64, len(t.Metrics))
	g := minuteGrid{prev: -1}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) != len(head) {
			return Trace{}, fmt.Errorf("%s:%d: want %d comma-separated fields (minute,%s), got %d", source, line, len(head), strings.Join(t.Metrics, ","), len(fields))
		}
		minute, err := strconv.ParseInt(strings.TrimSpace(fields[0]), 10, 64)
		if err != nil {
			return Trace{}, fmt.Errorf("%s:%d: column 1 (minute): %q is not an integer", source, line, fields[0])
		}
		for k, f := range fields[1:] {
			col := func(format string, a ...any) error {
				return fmt.Errorf("%s:%d: column %d (%s): %s", source, line, k+2, t.Metrics[k], fmt.Sprintf(format, a...))
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return Trace{}, col("value %q is not a number", f)
			}
			if why := badValue(v); why != "" {
				return Trace{}, col("%s", why)
			}
			t.Columns[k] = append(t.Columns[k], v)
		}
		if why := g.advance(minute); why != "" {
			return Trace{}, fmt.Errorf("%s:%d: column 1 (minute): %s", source, line, why)
		}
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("%s:%d: %w", source, line, err)
	}
	if len(t.Columns[0]) == 0 {
		return Trace{}, fmt.Errorf("%s: no data rows", source)
	}
	t.Values = t.Columns[0]
	t.StepMinutes = int(max(g.step, 1))
	return t, nil
}

func isHeader(fields []string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(fields[0]), 64)
	return err != nil
}

// Halves splits the index's traces into two fixed halves for out-of-sample work: sorted by
// class (periodic, smooth, bursty, then any other) and within a class by file name, then dealt
// alternately to A and B along that one list, so each class is split as evenly as it can be and
// the odd trace of one class goes to the other half in the next. The same index gives the same
// halves. Names are file names.
func Halves(idx Index) (a, b []string) {
	rank := map[string]int{"periodic": 0, "smooth": 1, "bursty": 2}
	files := make([]Entry, 0, len(idx))
	for _, e := range idx {
		files = append(files, e)
	}
	sort.Slice(files, func(i, j int) bool {
		ri, okI := rank[files[i].Class]
		rj, okJ := rank[files[j].Class]
		if !okI {
			ri = len(rank)
		}
		if !okJ {
			rj = len(rank)
		}
		if ri != rj {
			return ri < rj
		}
		if files[i].Class != files[j].Class {
			return files[i].Class < files[j].Class
		}
		return files[i].File < files[j].File
	})
	for i, e := range files {
		if i%2 == 0 {
			a = append(a, e.File)
		} else {
			b = append(b, e.File)
		}
	}
	return a, b
}
