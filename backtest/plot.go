package backtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/debi-scaler/debi/scaling"
)

// Figure geometry. Every figure is plotWidth wide at plotDPI; the replica figures stack one
// panel of panelHeight per policy under a header.
const (
	plotDPI             = 100
	plotWidth           = 12 * vg.Inch
	panelHeight         = 2 * vg.Inch
	panelHeaderHeight   = 0.95 * vg.Inch
	panelFooterHeight   = 0.3 * vg.Inch
	frontierHeight      = 6.5 * vg.Inch
	frontierLegendWidth = 4 * vg.Inch
	// overviewBuckets is the number of buckets a long series is reduced to for drawing (about
	// two pixels each).
	overviewBuckets = 500
)

// plotHeightPx is the height in pixels of a figure of WritePlots: the replica and burst figures of
// a trace with the given number of runs (policies and the oracle), or the frontier with runs 0.
// Every figure is plotWidthPx pixels wide.
func plotHeightPx(runs int) int {
	if runs == 0 {
		return pixels(frontierHeight)
	}
	return pixels(panelFigureHeight(runs))
}

// plotWidthPx is the width in pixels of every figure of WritePlots.
const plotWidthPx = int(plotWidth / vg.Inch * plotDPI)

func pixels(l vg.Length) int { return int(l/vg.Inch*plotDPI + 0.5) }

func panelFigureHeight(runs int) vg.Length {
	return panelHeaderHeight + vg.Length(runs)*panelHeight + panelFooterHeight
}

// WritePlots writes three PNGs per trace into dir and returns their paths:
//
//   - <trace>-replicas.png: one panel per run (the policies, then the oracle) over the scored
//     period: the demand in pods at u_sla, D/(u_sla·R), the ready pods and the spec replicas, the
//     overloaded stretches (D > u_sla·ready·R) shaded red and the replica bounds dashed;
//   - <trace>-burst.png: the same panels zoomed on the largest 30-minute rise of demand, where
//     each scaling action and start-up delay shows;
//   - <trace>-frontier.png: every run's cost relative to hpa against its overload fraction, with
//     the sweep of fixed HPA targets and its lower envelope.
//
// Each policy keeps one colour in every figure. The report must come from a run with
// Options.KeepSeries (debi backtest --plots).
func (rep *Report) WritePlots(dir string) ([]string, error) {
	if len(rep.Traces) == 0 {
		return nil, errors.New("plots: the report has no traces")
	}
	// Every trace is checked before anything is written.
	views := make([]*traceView, len(rep.Traces))
	for i := range rep.Traces {
		v, err := rep.newTraceView(&rep.Traces[i])
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", filepath.Join(dir, fileSafe(rep.Traces[i].Trace)+"-replicas.png"), err)
		}
		views[i] = v
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var files []string
	for _, v := range views {
		base := filepath.Join(dir, fileSafe(v.tr.Trace))
		for _, f := range []struct {
			suffix string
			draw   func() (*vgimg.Canvas, error)
		}{
			{"-replicas.png", v.overview},
			{"-burst.png", v.burst},
			{"-frontier.png", v.frontier},
		} {
			file := base + f.suffix
			if err := writeFigure(file, f.draw); err != nil {
				return files, fmt.Errorf("plot %s: %w", file, err)
			}
			files = append(files, file)
		}
	}
	return files, nil
}

// fileSafe is name as a file name that needs no quoting in a shell: letters, digits, '.', '_'
// and '-', every run of other characters one '-' ("web (7d to 2026-11-24 00:00)" is
// web-7d-to-2026-11-24-00-00).
func fileSafe(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range name {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.Trim(b.String(), "-.")
	if s == "" {
		return "trace"
	}
	return s
}

// writeFigure draws a figure and writes it as a PNG; a panic of the drawing library becomes an
// error.
func writeFigure(file string, fig func() (*vgimg.Canvas, error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing: %v", r)
		}
	}()
	img, err := fig()
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// traceView is one trace's runs ready for drawing.
type traceView struct {
	o      Options
	tr     *TraceResult
	demand []float64 // cores, per tick from the trace start
	tick   time.Duration
	warm   int // first scored tick
	n      int // ticks
	// perPod converts cores into pods at u_sla.
	perPod float64
}

func (rep *Report) newTraceView(tr *TraceResult) (*traceView, error) {
	if len(tr.Runs) == 0 {
		return nil, fmt.Errorf("trace %s has no runs", tr.Trace)
	}
	v := &traceView{o: rep.Options, tr: tr, perPod: rep.Options.SLAUtilization * rep.Options.Request}
	for _, r := range tr.Runs {
		s := r.Series
		if s == nil {
			return nil, fmt.Errorf("trace %s, policy %s has no per-tick series: run the backtest with Options.KeepSeries (debi backtest --plots DIR)", tr.Trace, r.Policy)
		}
		if s.Tick <= 0 || len(s.Demand) == 0 || len(s.Replicas) != len(s.Demand) || len(s.Ready) != len(s.Demand) {
			return nil, fmt.Errorf("trace %s, policy %s: malformed series (tick %v, %d demand, %d replicas, %d ready points)",
				tr.Trace, r.Policy, s.Tick, len(s.Demand), len(s.Replicas), len(s.Ready))
		}
		if v.demand == nil {
			v.demand, v.tick, v.n = s.Demand, s.Tick, len(s.Demand)
		} else if len(s.Demand) != v.n || s.Tick != v.tick {
			return nil, fmt.Errorf("trace %s, policy %s: series of %d ticks of %v, the first run has %d of %v",
				tr.Trace, r.Policy, len(s.Demand), s.Tick, v.n, v.tick)
		}
	}
	if !(v.perPod > 0) {
		return nil, fmt.Errorf("u_sla·R = %v is not positive", v.perPod)
	}
	v.warm = int((tr.WarmupTime + v.tick - 1) / v.tick)
	if v.warm >= v.n-1 {
		return nil, fmt.Errorf("trace %s: the warm-up (%v) leaves no scored ticks of the %d", tr.Trace, tr.WarmupTime, v.n)
	}
	return v, nil
}

// overloaded reports whether tick i of run r is overloaded, by the scorer's own comparison.
func (v *traceView) overloaded(r Run, i int) bool {
	return scaling.Overloaded(v.demand[i], v.o.SLAUtilization, r.Series.Ready[i], v.o.Request)
}

func classSuffix(class string) string {
	if class == "" {
		return ""
	}
	return " (" + class + ")"
}

// humanSpan prints a duration in its largest sensible unit.
func humanSpan(d time.Duration) string {
	switch {
	case d >= 72*time.Hour:
		return strconv.FormatFloat(d.Hours()/24, 'f', 1, 64) + " days"
	case d >= 2*time.Hour:
		return strconv.FormatFloat(d.Hours(), 'f', 1, 64) + " h"
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.Itoa(int(d.Minutes())) + " min"
	}
	return d.String()
}

// frs is the frontier ratio with a * when clamped to the envelope's end.
func frs(r Run) string {
	s := f3(r.FrontierRatio)
	if r.FrontierClamped && s != "-" {
		s += "*"
	}
	return s
}
