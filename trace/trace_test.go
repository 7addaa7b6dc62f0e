package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmbedded(t *testing.T) {
	ts, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 {
		t.Fatalf("want 3 embedded traces, got %d", len(ts))
	}
	classes := map[string]bool{}
	for _, tr := range ts {
		if tr.StepMinutes != 5 || len(tr.Values) < 8000 {
			t.Errorf("%s: step %d, %d values", tr.Name, tr.StepMinutes, len(tr.Values))
		}
		classes[tr.Class] = true
	}
	if !classes["periodic"] || !classes["smooth"] || !classes["bursty"] {
		t.Errorf("embedded traces should cover every class, got %v", classes)
	}
	if !strings.Contains(Attribution(), "CC-BY-4.0") {
		t.Error("attribution text missing")
	}
}

func TestParseErrorsNameLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not a number", "minute,value\n0,1\n1,abc\n", "f.csv:3: value \"abc\" is not a number"},
		{"NaN", "0,1\n1,NaN\n", "f.csv:2: value is NaN"},
		{"Inf", "0,1\n1,+Inf\n", "f.csv:2: value is +Inf"},
		{"negative", "0,1\n1,-3\n", "f.csv:2: value -3 is negative"},
		{"three fields", "0,1\n1,2,3\n", "f.csv:2: want 2 comma-separated fields"},
		{"gap", "0,1\n5,1\n10,1\n20,1\n", "f.csv:4: minute 20 breaks the step of 5"},
		{"backwards", "0,1\n5,1\n5,1\n", "f.csv:3: minute 5 does not advance"},
		{"empty", "minute,value\n", "f.csv: no data rows"},
		{"bad minute", "0,1\nx1,2\n", "f.csv:2: minute \"x1\" is not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), "f.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	tr, err := Parse(strings.NewReader("minute,value\n0,1.5\n5,2\n10,0\n"), "/x/my_trace.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "my_trace" || tr.StepMinutes != 5 || len(tr.Values) != 3 || tr.Values[0] != 1.5 {
		t.Fatalf("got %+v", tr)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("minute,value\n0,1\n1,2\n")
	f.Add("0,NaN\n")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := Parse(strings.NewReader(s), "fuzz.csv")
		if err == nil && len(tr.Values) == 0 {
			t.Fatal("no error but no values")
		}
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz.csv") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

func TestReadIndex(t *testing.T) {
	idx, err := ReadIndex(strings.NewReader("file,class,step_minutes,unit\n"+
		"a_1min.csv,bursty,1,\"requests, per minute\"\nb.csv,smooth,5,x\n"), "index.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 2 || idx["a_1min.csv"] != (Entry{"a_1min.csv", "bursty", 1}) || idx["b.csv"].Class != "smooth" {
		t.Fatalf("got %+v", idx)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"no class column", "file,step_minutes\na.csv,1\n", "index.csv:1: header"},
		{"unknown class", "file,class\na.csv,spiky\n", "index.csv:2: class \"spiky\" of a.csv"},
		{"bad step", "file,class,step_minutes\na.csv,smooth,0\n", "index.csv:2: step_minutes \"0\""},
		{"duplicate", "file,class\na.csv,smooth\na.csv,bursty\n", "index.csv:3: a.csv listed twice"},
		{"empty", "", "index.csv: no header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadIndex(strings.NewReader(tc.in), "index.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLoadFileClassFromIndex: the class is the index.csv's beside the file, an embedded trace's
// name falls back to the embedded index, and a step that contradicts the index is an error.
func TestLoadFileClassFromIndex(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("x_5min.csv", "minute,value\n0,1\n5,2\n")
	write("y_1min.csv", "minute,value\n0,1\n5,2\n")
	write("google2019_cell_avg_cpu_5min.csv", "minute,value\n0,1\n5,2\n")
	write("unlisted.csv", "minute,value\n0,1\n5,2\n")
	write(IndexFile, "file,class,step_minutes\nx_5min.csv,bursty,5\ny_1min.csv,smooth,1\n")
	tr, err := LoadFile(filepath.Join(dir, "x_5min.csv"))
	if err != nil || tr.Class != "bursty" {
		t.Fatalf("x: %+v, %v", tr, err)
	}
	if _, err := LoadFile(filepath.Join(dir, "y_1min.csv")); err == nil || !strings.Contains(err.Error(), "5-minute step, its index row says 1") {
		t.Fatalf("y: want a step mismatch, got %v", err)
	}
	if tr, err := LoadFile(filepath.Join(dir, "google2019_cell_avg_cpu_5min.csv")); err != nil || tr.Class != "smooth" {
		t.Fatalf("embedded name: %+v, %v", tr, err)
	}
	if tr, err := LoadFile(filepath.Join(dir, "unlisted.csv")); err != nil || tr.Class != "" {
		t.Fatalf("unlisted: %+v, %v", tr, err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "z.csv"), []byte("0,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, IndexFile), []byte("file,class\nz.csv,weird\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(filepath.Join(bad, "z.csv")); err == nil {
		t.Fatal("a broken index.csv should fail LoadFile")
	}
}

// TestHalves: alternate along the list sorted by class then name; deterministic; every class
// split within one; the shared collection, where present, splits 10 / 9.
func TestHalves(t *testing.T) {
	idx := Index{}
	for _, e := range []Entry{{"p3", "periodic", 5}, {"p1", "periodic", 5}, {"p2", "periodic", 5},
		{"s1", "smooth", 5}, {"s2", "smooth", 5}, {"b2", "bursty", 1}, {"b1", "bursty", 1}, {"b3", "bursty", 1}} {
		idx[e.File] = e
	}
	a, b := Halves(idx)
	if got, want := strings.Join(a, " ")+" | "+strings.Join(b, " "), "p1 p3 s2 b2 | p2 s1 b1 b3"; got != want {
		t.Fatalf("halves %q, want %q", got, want)
	}
	a2, b2 := Halves(idx)
	if strings.Join(a2, ",") != strings.Join(a, ",") || strings.Join(b2, ",") != strings.Join(b, ",") {
		t.Fatal("not deterministic")
	}
	shared, err := LoadIndex(filepath.Join("..", "..", "shared", "traces"))
	if err != nil {
		t.Fatal(err)
	}
	if shared == nil {
		t.Log("skipped the shared collection's split: ../shared/traces/index.csv is absent")
		return
	}
	a, b = Halves(shared)
	count := func(files []string) map[string]int {
		m := map[string]int{}
		for _, f := range files {
			m[shared[f].Class]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	for _, c := range []string{"periodic", "smooth", "bursty"} {
		if d := ca[c] - cb[c]; d < -1 || d > 1 {
			t.Errorf("class %s: %d in A, %d in B", c, ca[c], cb[c])
		}
	}
	if len(a)+len(b) != len(shared) || len(a)-len(b) > 1 || len(b) > len(a) {
		t.Errorf("%d + %d of %d traces", len(a), len(b), len(shared))
	}
}

// TestParseMetricsErrorsNameColumn: in a trace with several metrics every error names the file,
// the line and the column (by number and metric), so a bad value in a 20,000-row file is found
// at once.
func TestParseMetricsErrorsNameColumn(t *testing.T) {
	const head = "minute,cpu,rps\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not a number", head + "0,1,2\n5,1,abc\n", "m.csv:3: column 3 (rps): value \"abc\" is not a number"},
		{"NaN in the first metric", head + "0,NaN,2\n", "m.csv:2: column 2 (cpu): value is NaN"},
		{"Inf", head + "0,1,2\n5,1,+Inf\n", "m.csv:3: column 3 (rps): value is +Inf"},
		{"negative", head + "# a comment\n0,1,-2\n", "m.csv:3: column 3 (rps): value -2 is negative"},
		{"short row", head + "0,1,2\n5,1\n", "m.csv:3: want 3 comma-separated fields (minute,cpu,rps), got 2"},
		{"bad minute", head + "0,1,2\nx,1,2\n", "m.csv:3: column 1 (minute): \"x\" is not an integer"},
		{"gap", head + "0,1,2\n5,1,2\n15,1,2\n", "m.csv:4: column 1 (minute): 15 breaks the step of 5"},
		{"backwards", head + "0,1,2\n0,1,2\n", "m.csv:3: column 1 (minute): 0 does not advance past 0"},
		{"duplicate metric", "minute,cpu,cpu\n0,1,2\n", "m.csv:1: column 3: metric \"cpu\" named twice (column 2)"},
		{"empty metric name", "minute,cpu,\n0,1,2\n", "m.csv:1: column 3: empty metric name"},
		{"first column not minute", "time,cpu,rps\n0,1,2\n", "m.csv:1: column 1: header \"time\", want minute"},
		{"no rows", head, "m.csv: no data rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), "m.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParseMetrics reads a header with two metrics into one column each, the first also as
// Values, so that every one-metric consumer sees the first metric.
func TestParseMetrics(t *testing.T) {
	tr, err := Parse(strings.NewReader("minute, cpu ,rps\n0,1.5,10\n5,2,20\n10,0,30\n"), "two.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tr.StepMinutes != 5 || strings.Join(tr.Metrics, "|") != "cpu|rps" || len(tr.Columns) != 2 {
		t.Fatalf("%+v", tr)
	}
	if tr.Columns[0][1] != 2 || tr.Columns[1][2] != 30 || &tr.Values[0] != &tr.Columns[0][0] {
		t.Fatalf("columns %v, values %v", tr.Columns, tr.Values)
	}
	// A one-metric file keeps no metric names: nothing changes for it.
	one, err := Parse(strings.NewReader("minute,value\n0,1\n5,2\n"), "one.csv")
	if err != nil || one.Metrics != nil || one.Columns != nil {
		t.Fatalf("one metric: %+v, %v", one, err)
	}
}

// TestTwoMetricTestdata: the shipped two-metric trace is the two embedded series it says it
// pairs by time index (testdata/README.md), unchanged, cut to the shorter one.
func TestTwoMetricTestdata(t *testing.T) {
	tr, err := LoadFile(filepath.Join("testdata", "azure2019_google2019_cpu_5min.csv"))
	if err != nil {
		t.Fatal(err)
	}
	emb, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	src := map[string][]float64{}
	for _, e := range emb {
		src[e.Name] = e.Values
	}
	for k, name := range []string{"azure_vm2019_total_cpu_5min", "google2019_cell_avg_cpu_5min"} {
		col, s := tr.Columns[k], src[name]
		if len(col) != min(len(src["azure_vm2019_total_cpu_5min"]), len(src["google2019_cell_avg_cpu_5min"])) {
			t.Fatalf("%s: %d rows", tr.Metrics[k], len(col))
		}
		for i := range col {
			if col[i] != s[i] {
				t.Fatalf("%s row %d: %v, %s has %v", tr.Metrics[k], i, col[i], name, s[i])
			}
		}
	}
}
