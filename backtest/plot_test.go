package backtest

import (
	"context"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/trace"
)

// checkPNGs asserts that the plot files of every trace exist and are PNGs of the size
// plotWidthPx × plotHeightPx.
func checkPNGs(t *testing.T, rep *Report, dir string, files []string) {
	t.Helper()
	if len(files) != 3*len(rep.Traces) {
		t.Fatalf("%d files for %d traces: %v", len(files), len(rep.Traces), files)
	}
	for _, tr := range rep.Traces {
		for _, kind := range []string{"replicas", "burst", "frontier"} {
			file := filepath.Join(dir, tr.Trace+"-"+kind+".png")
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, format, err := image.DecodeConfig(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			h := plotHeightPx(len(tr.Runs))
			if kind == "frontier" {
				h = plotHeightPx(0)
			}
			if format != "png" || cfg.Width != plotWidthPx || cfg.Height != h {
				t.Errorf("%s: %s of %d×%d, want png of %d×%d", file, format, cfg.Width, cfg.Height, plotWidthPx, h)
			}
		}
	}
}

// TestWritePlots draws the figures of a short backtest and checks what it wrote; a report
// without series is refused with a pointer to KeepSeries.
func TestWritePlots(t *testing.T) {
	ts, err := trace.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.MaxSteps, o.KeepSeries = 1500, true
	o.Policies = []string{"hpa", "apa", "debi"}
	rep, err := RunTraces(context.Background(), ts[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Traces[0].Runs); n != 4 {
		t.Fatalf("%d runs, want 3 policies and the oracle", n)
	}
	dir := t.TempDir()
	start := time.Now()
	files, err := rep.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files in %v", len(files), time.Since(start))
	checkPNGs(t, rep, dir, files)

	bare := *rep
	bare.Traces = []TraceResult{rep.Traces[0]}
	bare.Traces[0].Runs = append([]Run(nil), rep.Traces[0].Runs...)
	for i := range bare.Traces[0].Runs {
		bare.Traces[0].Runs[i].Series = nil
	}
	files, err = bare.WritePlots(filepath.Join(dir, "bare"))
	if err == nil || !strings.Contains(err.Error(), "KeepSeries") || len(files) != 0 {
		t.Errorf("report without series: files %v, error %v; want an error naming KeepSeries", files, err)
	}
	if _, err := (&Report{}).WritePlots(dir); err == nil {
		t.Error("empty report: no error")
	}
}

// TestPlotFull draws the figures of every embedded trace, whole, for hpa, apa, debi and
// evt-holtwinters-hpa into $DEBI_PLOT_DIR, to look at; it is skipped without that variable.
func TestPlotFull(t *testing.T) {
	dir := os.Getenv("DEBI_PLOT_DIR")
	if dir == "" {
		t.Skip("set DEBI_PLOT_DIR to draw the full embedded traces there")
	}
	ts, err := trace.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.KeepSeries = true
	o.Policies = []string{"hpa", "apa", "debi", "evt-holtwinters-hpa"}
	rep, err := RunTraces(context.Background(), ts, o)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	files, err := rep.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WritePlots: %d files in %v: %s", len(files), time.Since(start), strings.Join(files, " "))
	checkPNGs(t, rep, dir, files)
}

// TestPlotOverloadSurvivesBuckets: in the reduced overview of a long run, a single overloaded
// tick still yields a shaded bucket; the burst zoom finds the one rise of demand.
func TestPlotOverloadSurvivesBuckets(t *testing.T) {
	const n, warm, lone = 200000, 1000, 123457
	o := DefaultOptions()
	demand := make([]float64, n)
	ready := make([]int32, n)
	for i := range demand {
		demand[i], ready[i] = 10, 4 // 10 cores on 4 pods of 5 cores: 50% utilisation
	}
	demand[lone] = 19 // one tick above u_sla·4·5 = 18 (a rise smaller than the burst)
	for i := 150000; i < 150120; i++ {
		demand[i] = 10 + float64(i-150000)/10 // a rise of 12 cores over 30 min
	}
	for i := 150120; i < 150200; i++ {
		ready[i] = 8
		demand[i] = 16
	}
	r := Run{Metrics: Metrics{Policy: "hpa"}, Series: &Series{Tick: o.Tick, Demand: demand, Replicas: ready, Ready: ready}}
	rep := &Report{Options: o, Traces: []TraceResult{{Trace: "synthetic", WarmupTime: warm * o.Tick, Runs: []Run{r}}}}
	v, err := rep.newTraceView(&rep.Traces[0])
	if err != nil {
		t.Fatal(err)
	}
	w := v.overviewWindow()
	if w.bucket < 2 || w.axis.unit != 24*time.Hour {
		t.Fatalf("overview of %d ticks: bucket %d, unit %v", n, w.bucket, w.axis.unit)
	}
	xs := v.overloadSpans(r, w)
	x := w.axis.x(lone)
	found := false
	for _, s := range xs {
		found = found || (s.x0 <= x && x < s.x1 && s.share > 0)
	}
	if !found {
		t.Errorf("the overloaded tick at x = %v is in no span: %v", x, xs)
	}
	if b := v.findBurst(); !b.rise || b.end < 150100 || b.end > 150119 || b.start > 150010 {
		t.Errorf("burst %+v, want the rise from tick 150000 to 150119", b)
	}
}
