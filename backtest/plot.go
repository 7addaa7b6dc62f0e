package backtest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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
	// burstRise is the span over which the burst zoom looks for the largest rise of demand;
	// burstHalfWindow the zoom on each side of it (the window is at most twice that).
	burstRise       = 30 * time.Minute
	burstHalfWindow = 3 * time.Hour
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

// Colours. Demand is drawn in near-black, overload in translucent red; no policy colour is red.
var (
	demandColor    = color.NRGBA{R: 0x20, G: 0x20, B: 0x20, A: 0xff}
	overloadColor  = color.NRGBA{R: 0xe0, G: 0x20, B: 0x20, A: 0x48}
	overloadStrip  = color.NRGBA{R: 0xd0, G: 0x10, B: 0x10, A: 0xe0}
	boundColor     = color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	sweepColor     = color.NRGBA{R: 0x90, G: 0x90, B: 0x90, A: 0xff}
	envelopeColor  = color.NRGBA{R: 0x40, G: 0x40, B: 0x40, A: 0xff}
	burstMarkColor = color.NRGBA{R: 0x40, G: 0x40, B: 0x40, A: 0xc0}

	// knownColors fix the colour of the policies the project compares, in every figure.
	knownColors = map[string]color.NRGBA{
		"hpa":                 {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
		"apa":                 {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
		"debi":                {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
		OraclePolicy:          {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
		"budget":              {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
		"holtwinters-hpa":     {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
		"evt-holtwinters-hpa": {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan
		"holtwinters-debi":    {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}, // olive
		"seasonal-naive-hpa":  {R: 0x39, G: 0x3b, B: 0x79, A: 0xff}, // indigo
	}
	// extraColors are picked by a hash of the name for other policies.
	extraColors = []color.NRGBA{
		{R: 0x63, G: 0x79, B: 0x39, A: 0xff}, {R: 0x8c, G: 0x6d, B: 0x31, A: 0xff},
		{R: 0x7b, G: 0x41, B: 0x73, A: 0xff}, {R: 0x31, G: 0x82, B: 0xbd, A: 0xff},
		{R: 0x31, G: 0xa3, B: 0x54, A: 0xff}, {R: 0x75, G: 0x6b, B: 0xb1, A: 0xff},
		{R: 0xbd, G: 0x9e, B: 0x39, A: 0xff}, {R: 0x17, G: 0x7e, B: 0x89, A: 0xff},
		{R: 0xa5, G: 0x51, B: 0x94, A: 0xff}, {R: 0x52, G: 0x54, B: 0xa3, A: 0xff},
		{R: 0x6b, G: 0x6e, B: 0xcf, A: 0xff}, {R: 0x84, G: 0x3c, B: 0x39, A: 0xff},
	}

	// knownGlyphs fix the frontier glyph of the compared policies; others get one by hash.
	knownGlyphs = map[string]int{
		"hpa": 1, "apa": 0, "debi": 2, OraclePolicy: 7, "budget": 3, "holtwinters-hpa": 4,
		"evt-holtwinters-hpa": 5, "holtwinters-debi": 6, "seasonal-naive-hpa": 8,
	}
	glyphs = []shapeGlyph{
		{sides: 0},                   // 0 circle
		{sides: 4, rot: math.Pi / 4}, // 1 square
		{sides: 4},                   // 2 diamond
		{sides: 3},                   // 3 triangle up
		{sides: 3, rot: math.Pi},     // 4 triangle down
		{sides: 5},                   // 5 pentagon
		{sides: 6},                   // 6 hexagon
		{sides: 5, star: true},       // 7 star
		{sides: 4, star: true},       // 8 four-pointed star
		{sides: 6, star: true},       // 9 six-pointed star
		{sides: 8},                   // 10 octagon
		{sides: 4, star: true, rot: math.Pi / 4},
	}

	plotFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
)

// policyColor is the fixed colour of a policy name.
func policyColor(name string) color.NRGBA {
	if c, ok := knownColors[strings.ToLower(name)]; ok {
		return c
	}
	return extraColors[hashName(name)%uint32(len(extraColors))]
}

func policyGlyph(name string) shapeGlyph {
	if g, ok := knownGlyphs[strings.ToLower(name)]; ok {
		return glyphs[g]
	}
	return glyphs[hashName(name)%uint32(len(glyphs))]
}

func hashName(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(name)))
	return h.Sum32()
}

// darker scales a colour toward black, for text and outlines in a policy's colour.
func darker(c color.NRGBA, f float64) color.NRGBA {
	return color.NRGBA{R: uint8(float64(c.R) * f), G: uint8(float64(c.G) * f), B: uint8(float64(c.B) * f), A: c.A}
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

// timeAxis is the mapping from ticks to the x axis of a replica figure.
type timeAxis struct {
	origin int           // tick at x = 0
	tick   time.Duration // tick length
	unit   time.Duration
	label  string
	// start, when set, is the time of tick 0 (a recorded trace): the labels are UTC dates.
	start time.Time
}

// dated puts the dates of a recorded trace on the axis.
func (a timeAxis) dated(start time.Time) timeAxis {
	if start.IsZero() {
		return a
	}
	a.start = start.UTC()
	a.label = "time (UTC) from " + a.start.Add(time.Duration(a.origin)*a.tick).Format("2006-01-02 15:04")
	return a
}

// at is the time at x, for a dated axis.
func (a timeAxis) at(x float64) time.Time {
	return a.start.Add(time.Duration(a.origin)*a.tick + time.Duration(x*float64(a.unit)))
}

func (a timeAxis) x(i int) float64 {
	return float64(time.Duration(i-a.origin)*a.tick) / float64(a.unit)
}

// Ticks makes timeAxis the ticker of its axis: labels at a round step giving at most about 14
// of them, minor ticks between.
func (a timeAxis) Ticks(lo, hi float64) []plot.Tick {
	steps := []float64{0.25, 0.5, 1, 2, 3, 6, 12, 24, 48, 96, 168}
	if a.unit >= 24*time.Hour {
		steps = []float64{0.25, 0.5, 1, 2, 5, 7, 14, 28, 56, 112}
	}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if (hi-lo)/s <= 14 {
			step = s
			break
		}
	}
	minor := step / 2
	switch step {
	case 1:
		minor = 0.25
	case 5, 7:
		minor = 1
	}
	var ts []plot.Tick
	for k := math.Ceil(lo / minor); k*minor <= hi; k++ {
		v := k * minor
		t := plot.Tick{Value: v}
		if r := v / step; math.Abs(r-math.Round(r)) < 1e-9 {
			t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			if !a.start.IsZero() {
				t.Label = a.at(v).Format("Jan 2 15:04")
				if a.unit >= 24*time.Hour && step >= 1 {
					t.Label = a.at(v).Format("Jan 2")
				}
			}
		}
		ts = append(ts, t)
	}
	return ts
}

// window is a stretch of ticks [from, to) drawn in a replica figure, reduced to buckets of
// bucket ticks when long.
type window struct {
	from, to, bucket int
	axis             timeAxis
	// marks are ticks drawn as dotted vertical lines (the burst's start and end).
	marks []int
}

// overview is <trace>-replicas.png: the whole scored period.
func (v *traceView) overview() (*vgimg.Canvas, error) {
	w := v.overviewWindow()
	span := time.Duration(v.n-v.warm) * v.tick
	title := fmt.Sprintf("%s%s — demand and capacity per policy over the scored period", v.tr.Trace, classSuffix(v.tr.Class))
	title += fmt.Sprintf("\n%s scored after a %s warm-up; tick %v, start-up delay %v, R = %g cores per pod, u_sla = %g",
		humanSpan(span), humanSpan(v.tr.WarmupTime), v.tick, v.o.StartupDelay, v.o.Request, v.o.SLAUtilization)
	if w.bucket > 1 {
		title += fmt.Sprintf("\nper %s: demand mean and maximum (thin); ready pods mean and range (band); spec maximum (thin); shading and foot bar: the share of the bucket overloaded",
			humanSpan(time.Duration(w.bucket)*v.tick))
	}
	return v.panels(title, w, false)
}

// overviewWindow is the whole scored period, in hours or, beyond 3 days, in days, reduced to
// buckets of a round span when long.
func (v *traceView) overviewWindow() window {
	ax := timeAxis{origin: v.warm, tick: v.tick, unit: time.Hour, label: "hours since the start of the scored period"}
	if time.Duration(v.n-v.warm)*v.tick > 72*time.Hour {
		ax.unit, ax.label = 24*time.Hour, "days since the start of the scored period"
	}
	w := window{from: v.warm, to: v.n, axis: ax, bucket: 1}
	if n := w.to - w.from; n > 2*overviewBuckets {
		// The bucket is a round span of at least n/overviewBuckets ticks.
		need := time.Duration((n+overviewBuckets-1)/overviewBuckets) * v.tick
		b := need
		for _, m := range []time.Duration{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 720, 1440} {
			if d := m * time.Minute; d >= need {
				b = d
				break
			}
		}
		w.bucket = max(1, int((b+v.tick-1)/v.tick))
	}
	w.axis = w.axis.dated(v.tr.Start)
	return w
}

// burst is <trace>-burst.png: a zoom on the largest rise of demand.
func (v *traceView) burst() (*vgimg.Canvas, error) {
	b := v.findBurst()
	half := int(burstHalfWindow / v.tick)
	from, to := b.centre-half, b.centre+half
	if from < v.warm {
		to += v.warm - from
		from = v.warm
	}
	if to > v.n {
		from = max(v.warm, from-(to-v.n))
		to = v.n
	}
	ax := timeAxis{origin: v.warm, tick: v.tick, unit: time.Hour, label: "hours since the start of the scored period"}.dated(v.tr.Start)
	w := window{from: from, to: to, bucket: 1, axis: ax, marks: []int{b.start, b.end}}
	day := ""
	if time.Duration(v.n-v.warm)*v.tick > 72*time.Hour {
		day = fmt.Sprintf(" (day %.1f)", ax.x(b.end)/24)
	}
	var title string
	if b.rise {
		title = fmt.Sprintf("%s%s — zoom on the largest rise of demand within %s (between the dotted lines)\n%.1f → %.1f pods at u_sla (%+.1f cores) from %.2f h to %.2f h after the start of the scored period%s; window of %s",
			v.tr.Trace, classSuffix(v.tr.Class), humanSpan(burstRise), v.demand[b.start]/v.perPod, v.demand[b.end]/v.perPod,
			v.demand[b.end]-v.demand[b.start], ax.x(b.start), ax.x(b.end), day, humanSpan(time.Duration(to-from)*v.tick))
	} else {
		title = fmt.Sprintf("%s%s — zoom on the demand maximum (dotted line): demand never rises within %s\n%.1f pods at u_sla at %.2f h after the start of the scored period%s; window of %s",
			v.tr.Trace, classSuffix(v.tr.Class), humanSpan(burstRise), v.demand[b.end]/v.perPod, ax.x(b.end), day, humanSpan(time.Duration(to-from)*v.tick))
	}
	title += fmt.Sprintf("\ntick %v, start-up delay %v: each step of the thin line is a scaling action; where it leads the thick line, new pods are starting", v.tick, v.o.StartupDelay)
	return v.panels(title, w, true)
}

type burstSpot struct {
	start, end, centre int
	rise               bool // false: the demand maximum
}

// findBurst finds the largest rise of demand over burstRise within the scored period (the rise
// ending at each tick is from the lowest demand of the burstRise before it); when demand never
// rises it falls back to the demand maximum.
func (v *traceView) findBurst() burstSpot {
	k := max(1, int(burstRise/v.tick))
	var dq []int // ticks of increasing demand: a sliding minimum
	best, bs, be := 0.0, v.warm, v.warm
	peak := v.warm
	for i := v.warm; i < v.n; i++ {
		d := v.demand[i]
		if d > v.demand[peak] {
			peak = i
		}
		for len(dq) > 0 && v.demand[dq[len(dq)-1]] >= d {
			dq = dq[:len(dq)-1]
		}
		dq = append(dq, i)
		for dq[0] < i-k {
			dq = dq[1:]
		}
		if r := d - v.demand[dq[0]]; r > best {
			best, bs, be = r, dq[0], i
		}
	}
	if best > 0 {
		return burstSpot{start: bs, end: be, centre: (bs + be) / 2, rise: true}
	}
	return burstSpot{start: peak, end: peak, centre: peak}
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

// yRange is the replica axis of window w, fitted to the data (demand in pods, every run's
// replicas, min_replicas) with 6 % headroom; maxOff says the max bound is above it (off the
// scale, as the legend says) rather than squashing the data.
func (v *traceView) yRange(w window) (ymax float64, maxOff bool) {
	top := float64(v.o.Params.MinReplicas)
	for i := w.from; i < w.to; i++ {
		top = math.Max(top, v.demand[i]/v.perPod)
		for _, r := range v.tr.Runs {
			top = math.Max(top, float64(r.Series.Replicas[i]))
		}
	}
	ymax = 1.06 * top
	return ymax, float64(v.o.Params.MaxReplicas) > ymax
}

// panels draws one panel per run over window w under a header with the title and the legend.
func (v *traceView) panels(title string, w window, zoom bool) (*vgimg.Canvas, error) {
	ymax, maxOff := v.yRange(w)
	plots := make([][]*plot.Plot, len(v.tr.Runs))
	for k, r := range v.tr.Runs {
		p, err := v.panel(r, w, ymax, zoom)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", r.Policy, err)
		}
		if k == len(v.tr.Runs)-1 {
			p.X.Label.Text = w.axis.label
		}
		plots[k] = []*plot.Plot{p}
	}
	h := panelFigureHeight(len(plots))
	img := vgimg.NewWith(vgimg.UseWH(plotWidth, h), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	header := draw.Crop(dc, vg.Points(8), -vg.Points(8), h-panelHeaderHeight, -vg.Points(4))
	body := draw.Crop(dc, 0, 0, 0, -panelHeaderHeight)
	drawHeader(header, title, v.panelLegend(w.bucket > 1, maxOff))
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadLeft: vg.Points(6), PadRight: vg.Points(14), PadBottom: vg.Points(4), PadY: vg.Points(8)}
	cs := plot.Align(plots, tiles, body)
	for k := range plots {
		plots[k][0].Draw(cs[k][0])
	}
	return img, nil
}

// panelLegend is the legend of the replica figures, drawn in the header (policy colours differ
// per panel, so the capacity entries are drawn in grey).
func (v *traceView) panelLegend(bucketed, maxOff bool) []legendItem {
	grey := color.NRGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff}
	var ready plot.Thumbnailer = &plotter.Line{LineStyle: draw.LineStyle{Color: grey, Width: vg.Points(2)}}
	if bucketed {
		ready = thumbs{bandThumb{color.NRGBA{R: grey.R, G: grey.G, B: grey.B, A: 0x50}}, ready}
	}
	bounds := fmt.Sprintf("min %d / max %d replicas", v.o.Params.MinReplicas, v.o.Params.MaxReplicas)
	if maxOff {
		// Short: the legend row has room for little more than the bounds.
		bounds = fmt.Sprintf("bounds %d–%d, max off scale", v.o.Params.MinReplicas, v.o.Params.MaxReplicas)
	}
	return []legendItem{
		{text: fmt.Sprintf("demand in pods at u_sla, D/(%g·%g)", v.o.SLAUtilization, v.o.Request), thumb: &plotter.Line{LineStyle: draw.LineStyle{Color: demandColor, Width: vg.Points(1.2)}}},
		{text: "ready pods (policy colour)", thumb: ready},
		{text: "spec replicas (thin)", thumb: &plotter.Line{LineStyle: draw.LineStyle{Color: grey, Width: vg.Points(0.7)}}},
		{text: "overloaded: D > u_sla·ready·R", thumb: &spans{}},
		{text: bounds, thumb: &plotter.Line{LineStyle: boundStyle()}},
	}
}

// bandThumb is the legend thumbnail of a band.
type bandThumb struct{ c color.Color }

func (b bandThumb) Thumbnail(c *draw.Canvas) {
	c.SetColor(b.c)
	c.Fill(rect(c.Min.X, c.Min.Y, c.Max.X, c.Max.Y))
}

func boundStyle() draw.LineStyle {
	return draw.LineStyle{Color: boundColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
}

type legendItem struct {
	text   string
	thumb  plot.Thumbnailer
	detail string // a second, smaller line (column legends only)
}

// drawLegendColumn draws the items top down in c, each with its thumbnail, its text and its
// detail line, then the notes.
func drawLegendColumn(c draw.Canvas, items []legendItem, notes string) {
	ts := text.Style{Color: color.Black, Font: font.From(plotFont, 11), XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
	ds := ts
	ds.Font, ds.YAlign = font.From(plotFont, 9.5), draw.YTop
	ds.Color = color.NRGBA{R: 0x40, G: 0x40, B: 0x40, A: 0xff}
	thumbW := vg.Points(24)
	hgt := ts.Height("Mg")
	y := c.Max.Y
	for _, it := range items {
		mid := y - hgt/2
		tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: mid - hgt/2}, Max: vg.Point{X: c.Min.X + thumbW, Y: mid + hgt/2}}}
		it.thumb.Thumbnail(&tc)
		x := c.Min.X + thumbW + vg.Points(6)
		c.FillText(ts, vg.Point{X: x, Y: mid}, it.text)
		y -= hgt + vg.Points(2)
		if it.detail != "" {
			c.FillText(ds, vg.Point{X: x, Y: y}, it.detail)
			y -= ds.Height(it.detail) + vg.Points(2)
		}
		y -= vg.Points(6)
	}
	if notes != "" {
		y -= vg.Points(8)
		ds.XAlign = draw.XLeft
		c.FillText(ds, vg.Point{X: c.Min.X, Y: y}, notes)
	}
}

// drawHeader writes the title lines at the top of c and the legend in one row under them.
func drawHeader(c draw.Canvas, title string, items []legendItem) {
	ts := text.Style{Color: color.Black, Font: font.From(plotFont, 12), XAlign: draw.XLeft, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	lines := strings.Split(title, "\n")
	y := c.Max.Y
	for i, l := range lines {
		st := ts
		if i > 0 {
			st.Font = font.From(plotFont, 10.5)
		}
		c.FillText(st, vg.Point{X: c.Min.X, Y: y}, l)
		y -= st.Height(l) + vg.Points(2)
	}
	ls := ts
	ls.Font = font.From(plotFont, 10.5)
	ls.YAlign = draw.YCenter
	hgt := ls.Height("Mg")
	y -= vg.Points(4) + hgt/2
	x := c.Min.X
	thumbW := vg.Points(24)
	for _, it := range items {
		tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: x, Y: y - hgt/2}, Max: vg.Point{X: x + thumbW, Y: y + hgt/2}}}
		it.thumb.Thumbnail(&tc)
		x += thumbW + vg.Points(4)
		c.FillText(ls, vg.Point{X: x, Y: y}, it.text)
		x += ls.Width(it.text) + vg.Points(18)
	}
}

// styleFonts sets readable sans-serif fonts on a plot.
func styleFonts(p *plot.Plot) {
	p.Title.TextStyle.Font = font.From(plotFont, 11)
	p.X.Label.TextStyle.Font = font.From(plotFont, 11)
	p.Y.Label.TextStyle.Font = font.From(plotFont, 11)
	p.X.Tick.Label.Font = font.From(plotFont, 10)
	p.Y.Tick.Label.Font = font.From(plotFont, 10)
	p.Legend.TextStyle.Font = font.From(plotFont, 11)
}

// panel is one run over window w. Per tick when the window is short; otherwise per bucket:
// the demand's maximum (spikes survive), the ready pods' mean as a line and their range as a
// band, the spec replicas' maximum, and the overloaded share of the bucket.
func (v *traceView) panel(r Run, w window, ymax float64, zoom bool) (*plot.Plot, error) {
	s := r.Series
	p := plot.New()
	styleFonts(p)
	p.Title.Padding = vg.Points(3)
	p.Title.TextStyle.Font = font.From(plotFont, 10.5)
	p.Title.Text = v.panelTitle(r, w, zoom)
	p.Y.Label.Text = "pods"
	p.X.Padding, p.Y.Padding = 0, 0
	p.Y.Tick.Marker = boundTicks{lo: float64(v.o.Params.MinReplicas), hi: float64(v.o.Params.MaxReplicas)}
	p.X.Tick.Marker = w.axis

	p.Add(&spans{xs: v.overloadSpans(r, w)})

	for _, b := range []float64{float64(v.o.Params.MinReplicas), float64(v.o.Params.MaxReplicas)} {
		p.Add(&hline{y: b, style: boundStyle()})
	}
	for _, m := range w.marks {
		p.Add(&vline{x: w.axis.x(m), style: draw.LineStyle{Color: burstMarkColor, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(1.5), vg.Points(2)}}})
	}

	col := policyColor(r.Policy)
	replicas := func(i int) float64 { return float64(s.Replicas[i]) }
	readyAt := func(i int) float64 { return float64(s.Ready[i]) }
	demandAt := func(i int) float64 { return v.demand[i] / v.perPod }
	var spec, ready, demand, peak *plotter.Line
	var err error
	if w.bucket <= 1 {
		if spec, err = plotter.NewLine(perTick(w, replicas, true)); err != nil {
			return nil, err
		}
		if ready, err = plotter.NewLine(perTick(w, readyAt, true)); err != nil {
			return nil, err
		}
		if demand, err = plotter.NewLine(perTick(w, demandAt, false)); err != nil {
			return nil, err
		}
		spec.StepStyle, ready.StepStyle = plotter.PostStep, plotter.PostStep
	} else {
		lo, hi := perBucket(w, readyAt, statMin), perBucket(w, readyAt, statMax)
		band := make(plotter.XYs, 0, 2*len(lo))
		band = append(band, hi...)
		for k := len(lo) - 1; k >= 0; k-- {
			band = append(band, lo[k])
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return nil, err
		}
		poly.Color = color.NRGBA{R: col.R, G: col.G, B: col.B, A: 0x50}
		poly.LineStyle.Width = 0
		p.Add(poly)
		if spec, err = plotter.NewLine(perBucket(w, replicas, statMax)); err != nil {
			return nil, err
		}
		if ready, err = plotter.NewLine(perBucket(w, readyAt, statMean)); err != nil {
			return nil, err
		}
		if demand, err = plotter.NewLine(perBucket(w, demandAt, statMean)); err != nil {
			return nil, err
		}
		if peak, err = plotter.NewLine(perBucket(w, demandAt, statMax)); err != nil {
			return nil, err
		}
		peak.Color, peak.Width = demandColor, vg.Points(0.5)
	}
	spec.Color, spec.Width = darker(col, 0.7), vg.Points(0.7)
	ready.Color, ready.Width = col, vg.Points(1.8)
	demand.Color, demand.Width = demandColor, vg.Points(1)
	p.Add(ready, spec, demand)
	if peak != nil {
		p.Add(peak)
	}
	// Fixed ranges, shared by every panel (Add widened them to the data).
	p.X.Min, p.X.Max = w.axis.x(w.from), w.axis.x(w.to)
	p.Y.Min, p.Y.Max = 0, ymax
	return p, nil
}

func (v *traceView) panelTitle(r Run, w window, zoom bool) string {
	cost := fmt.Sprintf("cost %s× hpa", f3(r.CostRatio))
	if math.IsNaN(r.CostRatio) || math.IsInf(r.CostRatio, 0) {
		cost = fmt.Sprintf("cost %.0f core-h", r.Cost)
	}
	t := fmt.Sprintf("%s — overload %s of the scored time, frontier ratio %s, %s, %.0f actions/day",
		r.Policy, pct2(r.OverloadFraction), frs(r), cost, r.ActionsPerDay)
	if zoom {
		over, actions := 0, 0
		for i := w.from; i < w.to; i++ {
			if v.overloaded(r, i) {
				over++
			}
			if i > w.from && r.Series.Replicas[i] != r.Series.Replicas[i-1] {
				actions++
			}
		}
		t += fmt.Sprintf("; in this window: %d actions, overloaded %s", actions, humanSpan(time.Duration(over)*v.tick))
	}
	return t
}

// frs is the frontier ratio with a * when clamped to the envelope's end.
func frs(r Run) string {
	s := f3(r.FrontierRatio)
	if r.FrontierClamped && s != "-" {
		s += "*"
	}
	return s
}

// overloadSpans are the overloaded stretches of run r in window w: every bucket with an
// overloaded tick, with its overloaded share (drawn darker the larger it is, with a bar of that
// share at the panel's foot), so that no overload is lost to the reduction. Neighbours of equal
// share are merged.
func (v *traceView) overloadSpans(r Run, w window) []span {
	var xs []span
	for a := w.from; a < w.to; a += w.bucket {
		b := min(a+w.bucket, w.to)
		over := 0
		for i := a; i < b; i++ {
			if v.overloaded(r, i) {
				over++
			}
		}
		if over == 0 {
			continue
		}
		share := float64(over) / float64(b-a)
		if k := len(xs); k > 0 && xs[k-1].x1 == w.axis.x(a) && xs[k-1].share == share {
			xs[k-1].x1 = w.axis.x(b)
		} else {
			xs = append(xs, span{w.axis.x(a), w.axis.x(b), share})
		}
	}
	return xs
}

// perTick returns the points of f at every tick of the window, with a closing point at w.to
// for a step line.
func perTick(w window, f func(int) float64, step bool) plotter.XYs {
	pts := make(plotter.XYs, 0, w.to-w.from+1)
	for i := w.from; i < w.to; i++ {
		pts = append(pts, plotter.XY{X: w.axis.x(i), Y: f(i)})
	}
	if step {
		pts = append(pts, plotter.XY{X: w.axis.x(w.to), Y: f(w.to - 1)})
	}
	return pts
}

type stat int

const (
	statMin stat = iota
	statMax
	statMean
)

// perBucket returns one point per bucket of the window at its middle: the minimum, maximum or
// mean of f over the bucket.
func perBucket(w window, f func(int) float64, st stat) plotter.XYs {
	pts := make(plotter.XYs, 0, (w.to-w.from)/w.bucket+1)
	for a := w.from; a < w.to; a += w.bucket {
		b := min(a+w.bucket, w.to)
		v := f(a)
		for i := a + 1; i < b; i++ {
			switch st {
			case statMin:
				v = math.Min(v, f(i))
			case statMax:
				v = math.Max(v, f(i))
			default:
				v += f(i)
			}
		}
		if st == statMean {
			v /= float64(b - a)
		}
		pts = append(pts, plotter.XY{X: (w.axis.x(a) + w.axis.x(b)) / 2, Y: v})
	}
	return pts
}

// spans shade x intervals over the height of the data area, the more opaque the larger their
// share (the overloaded share of the interval's ticks), with a bar of that share at the foot; each
// is at least a pixel wide and its bar a pixel high, so a single overloaded tick stays visible.
type spans struct {
	xs []span
}

type span struct {
	x0, x1, share float64
}

// spanStrip is the height of the bars at the foot of a panel.
const spanStrip = 8 * vg.Inch / 72

// shadeColor is the shading of a bucket whose share of ticks is overloaded: opacity in proportion
// to the share, so a bursty trace with a few overloaded ticks in every bucket is not one solid
// band (the foot bar, at least a pixel high, still marks every overloaded bucket).
func shadeColor(share float64) color.NRGBA {
	c := overloadColor
	c.A = uint8(math.Round(min(max(share, 0), 1) * float64(overloadColor.A)))
	return c
}

func (s *spans) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	px := vg.Inch / plotDPI
	end := c.Min.X
	for _, iv := range s.xs {
		a, b := trX(iv.x0), trX(iv.x1)
		if b-a < 1.5*px {
			m := (a + b) / 2
			a, b = m-0.75*px, m+0.75*px
		}
		a, b = max(a, c.Min.X, end), min(b, c.Max.X)
		if b <= a {
			continue
		}
		end = b
		c.SetColor(shadeColor(iv.share))
		c.Fill(rect(a, c.Min.Y+spanStrip, b, c.Max.Y))
		c.SetColor(overloadStrip)
		c.Fill(rect(a, c.Min.Y, b, c.Min.Y+max(px, vg.Length(iv.share)*spanStrip)))
	}
}

func (s *spans) Thumbnail(c *draw.Canvas) {
	h := c.Max.Y - c.Min.Y
	c.SetColor(shadeColor(1))
	c.Fill(rect(c.Min.X, c.Min.Y+h/3, c.Max.X, c.Max.Y))
	c.SetColor(overloadStrip)
	c.Fill(rect(c.Min.X, c.Min.Y, c.Max.X, c.Min.Y+h/3))
}

func rect(x0, y0, x1, y1 vg.Length) vg.Path {
	var p vg.Path
	p.Move(vg.Point{X: x0, Y: y0})
	p.Line(vg.Point{X: x1, Y: y0})
	p.Line(vg.Point{X: x1, Y: y1})
	p.Line(vg.Point{X: x0, Y: y1})
	p.Close()
	return p
}

// hline is a horizontal line across the data area at y; vline a vertical one at x.
type hline struct {
	y     float64
	style draw.LineStyle
}

func (h *hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	if y < c.Min.Y || y > c.Max.Y {
		return
	}
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

type vline struct {
	x     float64
	style draw.LineStyle
}

func (l *vline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(l.x)
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(l.style, x, c.Min.Y, x, c.Max.Y)
}

// boundTicks are the default ticks of the replica axis with the bounds labelled "min n" and
// "max n" (labels too close to them are dropped).
type boundTicks struct{ lo, hi float64 }

func (b boundTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	gap := 0.08 * (hi - lo)
	out := make([]plot.Tick, 0, len(ts)+2)
	for _, t := range ts {
		if t.Label != "" {
			t.Label = strconv.FormatFloat(t.Value, 'f', -1, 64)
		}
		if t.Label != "" && (math.Abs(t.Value-b.lo) < gap || math.Abs(t.Value-b.hi) < gap) {
			t.Label = ""
		}
		out = append(out, t)
	}
	for _, v := range []struct {
		v    float64
		name string
	}{{b.lo, "min"}, {b.hi, "max"}} {
		if v.v >= lo && v.v <= hi {
			out = append(out, plot.Tick{Value: v.v, Label: v.name + " " + strconv.FormatFloat(v.v, 'f', -1, 64)})
		}
	}
	return out
}

// shapeGlyph is a filled, outlined marker: a circle (sides 0), a regular polygon or a star.
type shapeGlyph struct {
	sides int
	star  bool
	rot   float64
}

func (g shapeGlyph) path(pt vg.Point, r vg.Length) vg.Path {
	var p vg.Path
	if g.sides == 0 {
		p.Move(vg.Point{X: pt.X + r, Y: pt.Y})
		p.Arc(pt, r, 0, 2*math.Pi)
		p.Close()
		return p
	}
	n := g.sides
	if g.star {
		n *= 2
	}
	for k := range n {
		a := math.Pi/2 + g.rot + 2*math.Pi*float64(k)/float64(n)
		rr := r
		if g.star && k%2 == 1 {
			rr = r * 0.45
		}
		q := vg.Point{X: pt.X + rr*vg.Length(math.Cos(a)), Y: pt.Y + rr*vg.Length(math.Sin(a))}
		if k == 0 {
			p.Move(q)
		} else {
			p.Line(q)
		}
	}
	p.Close()
	return p
}

func (g shapeGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius
	if g.star {
		r *= 1.35 // a star looks smaller than a polygon of the same radius
	}
	path := g.path(pt, r)
	c.SetColor(sty.Color)
	c.Fill(path)
	c.SetLineStyle(draw.LineStyle{Color: color.NRGBA{A: 0xc0}, Width: vg.Points(0.7)})
	c.Stroke(path)
}

// frontier is <trace>-frontier.png.
func (v *traceView) frontier() (*vgimg.Canvas, error) {
	tr := v.tr
	hpaCost := math.NaN()
	for _, r := range tr.Runs {
		if r.Policy == "hpa" {
			hpaCost = r.Cost
		}
	}
	relative := hpaCost > 0 && !math.IsInf(hpaCost, 0)
	yOf := func(cost float64) float64 {
		if relative {
			return cost / hpaCost
		}
		return cost
	}
	const xs = 100 // overload in percent
	var all []float64
	for _, f := range tr.Frontier {
		all = append(all, f.OverloadFraction*xs)
	}
	for _, r := range tr.Runs {
		all = append(all, r.OverloadFraction*xs)
	}
	scale := newSymlog(all)

	p := plot.New()
	styleFonts(p)
	p.Title.Text = fmt.Sprintf("%s%s — cost against overload", tr.Trace, classSuffix(tr.Class))
	p.Title.TextStyle.Font = font.From(plotFont, 12)
	// The x label is drawn under the plot by hand: the plot would place it by the data midpoint,
	// which a symlog axis puts far right.
	xlabel := fmt.Sprintf("overload: share of the scored time with D > u_sla·ready·R, %% (symlog: linear below %s%%, 0 at the left edge)", trimFloat(scale.c))
	if relative {
		p.Y.Label.Text = "cost relative to hpa (hpa = 1)"
	} else {
		p.Y.Label.Text = "cost (core-hours; no hpa run to compare with)"
	}
	p.X.Scale = scale
	p.X.Tick.Marker = scale
	p.X.Min, p.X.Max = 0, scale.top

	lay := &labelLayer{}
	lsty := text.Style{Font: font.From(plotFont, 9), Handler: plot.DefaultTextHandler, Color: color.NRGBA{R: 0x50, G: 0x50, B: 0x50, A: 0xff}}

	var legend []legendItem
	sw := slices.Clone(tr.Frontier)
	sort.Slice(sw, func(i, j int) bool { return sw[i].Target < sw[j].Target })
	var sweepLine plotter.XYs
	var onEnv, offEnv plotter.XYs
	for _, f := range sw {
		pt := plotter.XY{X: f.OverloadFraction * xs, Y: yOf(f.Cost)}
		if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
			continue
		}
		sweepLine = append(sweepLine, pt)
		r := vg.Points(3)
		if f.OnEnvelope {
			onEnv = append(onEnv, pt)
			r = vg.Points(4)
		} else {
			offEnv = append(offEnv, pt)
		}
		lay.add(pt, trimFloat(f.Target), lsty, r, 1)
	}
	if len(sweepLine) > 0 {
		l, err := plotter.NewLine(sweepLine)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = sweepColor, vg.Points(1.2)
		p.Add(l)
		lay.line(sweepLine)
		if len(offEnv) > 0 {
			s, err := plotter.NewScatter(offEnv)
			if err != nil {
				return nil, err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: color.White, Radius: vg.Points(3), Shape: ringGlyph{sweepColor}}
			p.Add(s)
			legend = append(legend, legendItem{"fixed HPA targets (label: target)", thumbs{l, s}, ""})
		}
		if len(onEnv) > 0 {
			s, err := plotter.NewScatter(onEnv)
			if err != nil {
				return nil, err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: envelopeColor, Radius: vg.Points(4), Shape: glyphs[0]}
			p.Add(s)
			if len(offEnv) == 0 {
				legend = append(legend, legendItem{"fixed HPA targets (label: target)", thumbs{l, s}, ""})
			}
			legend = append(legend, legendItem{"on the lower envelope", s, ""})
		}
	}
	if relative {
		p.Add(&hline{y: 1, style: draw.LineStyle{Color: boundColor, Width: vg.Points(0.7), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}})
	}
	// Later runs get smaller glyphs, so that runs on the same point stay visible, nested.
	for k, r := range tr.Runs {
		pt := plotter.XY{X: r.OverloadFraction * xs, Y: yOf(r.Cost)}
		if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
			continue
		}
		col := policyColor(r.Policy)
		s, err := plotter.NewScatter(plotter.XYs{pt})
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(max(4, 7.5-0.7*float64(k))), Shape: policyGlyph(r.Policy)}
		p.Add(s)
		st := lsty
		st.Font = font.From(plotFont, 11)
		st.Color = darker(col, 0.7)
		lay.add(pt, r.Policy, st, vg.Points(7), 0)
		legend = append(legend, legendItem{r.Policy, s, fmt.Sprintf("overload %s, cost %s, frontier ratio %s", pct2(r.OverloadFraction), costText(r, relative), frs(r))})
	}
	p.Add(lay)
	// Room for the labels and glyphs above and below the data.
	lo, hi := p.Y.Min, p.Y.Max
	if hi > lo {
		pad := 0.08 * (hi - lo)
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
	} else {
		p.Y.Min, p.Y.Max = lo*0.9-0.01, hi*1.1+0.01
	}
	p.X.Min, p.X.Max = 0, scale.top

	img := vgimg.NewWith(vgimg.UseWH(plotWidth, frontierHeight), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	lst := text.Style{Color: color.Black, Font: font.From(plotFont, 11), XAlign: draw.XCenter, YAlign: draw.YBottom, Handler: plot.DefaultTextHandler}
	left := draw.Crop(dc, vg.Points(6), -frontierLegendWidth, vg.Points(8)+lst.Height(xlabel), -vg.Points(6))
	p.Draw(left)
	da := p.DataCanvas(left)
	dc.FillText(lst, vg.Point{X: (da.Min.X + da.Max.X) / 2, Y: vg.Points(6)}, xlabel)
	right := draw.Crop(dc, plotWidth-frontierLegendWidth+vg.Points(14), -vg.Points(6), vg.Points(6), -vg.Points(40))
	notes := "frontier ratio: the cost over the cost of the envelope\nat the same overload (* = clamped to the envelope's\nend); below 1 beats every fixed HPA target."
	if relative {
		notes += "\nCosts are relative to hpa's over the scored period."
	}
	drawLegendColumn(right, legend, notes)
	return img, nil
}

func costText(r Run, relative bool) string {
	if relative {
		return f3(r.CostRatio) + "× hpa"
	}
	return fmt.Sprintf("%.0f core-h", r.Cost)
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

// thumbs draws several thumbnails on top of each other.
type thumbs []plot.Thumbnailer

func (t thumbs) Thumbnail(c *draw.Canvas) {
	for _, th := range t {
		th.Thumbnail(c)
	}
}

// ringGlyph is a white disc with a coloured ring: a sweep point off the envelope.
type ringGlyph struct{ c color.Color }

func (g ringGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	path := glyphs[0].path(pt, sty.Radius)
	c.SetColor(color.White)
	c.Fill(path)
	c.SetLineStyle(draw.LineStyle{Color: g.c, Width: vg.Points(1.2)})
	c.Stroke(path)
}

// symlog is a symmetric-log axis for non-negative data: linear on [0, c], logarithmic above,
// x ↦ log10(1 + x/c). It is also its own ticker (0, c, 10c, …, with minor ticks between).
type symlog struct {
	c   float64 // linear threshold
	top float64 // axis maximum: a decade multiple of c above the data
}

func newSymlog(vals []float64) symlog {
	minPos, maxV := math.Inf(1), 0.0
	for _, v := range vals {
		if v > 0 && v < minPos {
			minPos = v
		}
		maxV = math.Max(maxV, v)
	}
	c := 0.01
	if !math.IsInf(minPos, 1) {
		c = math.Pow(10, math.Floor(math.Log10(minPos)))
		c = math.Min(math.Max(c, 1e-4), 0.1)
	}
	s := symlog{c: c}
	// The axis ends a bit beyond the data, on a multiple of a power of ten.
	target := math.Max(maxV, c) * 1.6
	d := math.Pow(10, math.Floor(math.Log10(target)))
	s.top = math.Ceil(target/d) * d
	return s
}

func (s symlog) f(x float64) float64 {
	if x < 0 {
		return -math.Log10(1 - x/s.c)
	}
	return math.Log10(1 + x/s.c)
}

func (s symlog) Normalize(lo, hi, x float64) float64 {
	return (s.f(x) - s.f(lo)) / (s.f(hi) - s.f(lo))
}

func (s symlog) Ticks(lo, hi float64) []plot.Tick {
	ts := []plot.Tick{{Value: 0, Label: "0"}}
	// Label 2 and 5 of each decade only when the decades are few enough to leave room.
	few := s.f(hi)-s.f(lo) <= 3.2
	for d := s.c; d <= hi*1.0001; d *= 10 {
		ts = append(ts, plot.Tick{Value: d, Label: trimFloat(d)})
		for k := 2; k < 10; k++ {
			if v := d * float64(k); v <= hi {
				t := plot.Tick{Value: v}
				if few && (k == 2 || k == 5) {
					t.Label = trimFloat(v)
				}
				ts = append(ts, t)
			}
		}
	}
	return slices.DeleteFunc(ts, func(t plot.Tick) bool { return t.Value < lo || t.Value > hi })
}

// labelLayer places text labels next to points without covering the markers, the lines given
// or each other: each label tries positions around its point, nearest first, and takes the
// first free one inside the data area (the least covered one when none is free). Labels of a
// lower rank are placed first.
type labelLayer struct {
	items []labelItem
	lines []plotter.XYs
}

type labelItem struct {
	pt    plotter.XY
	text  string
	style text.Style
	r     vg.Length // radius of the marker to clear
	rank  int
}

func (l *labelLayer) add(pt plotter.XY, txt string, sty text.Style, r vg.Length, rank int) {
	l.items = append(l.items, labelItem{pt, txt, sty, r, rank})
}

func (l *labelLayer) line(pts plotter.XYs) { l.lines = append(l.lines, pts) }

func (l *labelLayer) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	at := func(pt plotter.XY) vg.Point { return vg.Point{X: trX(pt.X), Y: trY(pt.Y)} }
	for _, pl := range l.place(at, c.Rectangle) {
		it := pl.item
		c.FillText(pl.style, pl.anchor, it.text)
		if pl.far {
			// A leader from the marker's edge to the nearest point of the label.
			q, best := at(it.pt), pl.box
			near := vg.Point{X: min(max(q.X, best.Min.X), best.Max.X), Y: min(max(q.Y, best.Min.Y), best.Max.Y)}
			d := near.Sub(q)
			if l := vg.Length(math.Hypot(float64(d.X), float64(d.Y))); l > it.r+vg.Points(1) {
				from := q.Add(d.Scale(it.r / l))
				c.StrokeLine2(draw.LineStyle{Color: color.NRGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xc0}, Width: vg.Points(0.5)}, from.X, from.Y, near.X, near.Y)
			}
		}
	}
}

// placed is where a label went: its style (alignment), anchor, box, and whether it is far
// enough from its point to need a leader.
type placed struct {
	item   labelItem
	style  text.Style
	anchor vg.Point
	box    vg.Rectangle
	far    bool
}

// labelRings are the distances beyond a marker's radius at which a label is tried, nearest
// first: far ones get a leader line.
var labelRings = []vg.Length{vg.Points(2), vg.Points(9), vg.Points(18), vg.Points(30), vg.Points(45), vg.Points(62)}

// place chooses every label's position inside area (at maps data to canvas points). A label
// never covering another label matters most (an overlap with a placed label costs ten times one
// with a marker or a line), then staying inside the area, then nearness.
func (l *labelLayer) place(at func(plotter.XY) vg.Point, area vg.Rectangle) []placed {
	var taken, labels []vg.Rectangle
	for _, it := range l.items {
		q := at(it.pt)
		taken = append(taken, vg.Rectangle{Min: vg.Point{X: q.X - it.r, Y: q.Y - it.r}, Max: vg.Point{X: q.X + it.r, Y: q.Y + it.r}})
	}
	// Lines as chains of small boxes.
	step := vg.Points(3)
	for _, ln := range l.lines {
		for k := 1; k < len(ln); k++ {
			a, b := at(ln[k-1]), at(ln[k])
			d := b.Sub(a)
			n := int(math.Hypot(float64(d.X), float64(d.Y))/float64(step)) + 1
			for j := 0; j <= n; j++ {
				q := a.Add(d.Scale(vg.Length(float64(j) / float64(n))))
				taken = append(taken, vg.Rectangle{Min: vg.Point{X: q.X - 1, Y: q.Y - 1}, Max: vg.Point{X: q.X + 1, Y: q.Y + 1}})
			}
		}
	}
	order := make([]int, len(l.items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return l.items[order[a]].rank < l.items[order[b]].rank })
	type cand struct {
		dx, dy float64 // direction
		xa     text.XAlignment
		ya     text.YAlignment
	}
	cands := []cand{
		{1, 0, draw.XLeft, draw.YCenter}, {1, 1, draw.XLeft, draw.YBottom}, {1, -1, draw.XLeft, draw.YTop},
		{0, 1, draw.XCenter, draw.YBottom}, {0, -1, draw.XCenter, draw.YTop},
		{-1, 0, draw.XRight, draw.YCenter}, {-1, 1, draw.XRight, draw.YBottom}, {-1, -1, draw.XRight, draw.YTop},
	}
	var out []placed
	for _, i := range order {
		it := l.items[i]
		q := at(it.pt)
		bestScore := math.Inf(1)
		var best placed
	search:
		for ring, gap := range labelRings {
			dist := it.r + gap
			for _, cd := range cands {
				sty := it.style
				sty.XAlign, sty.YAlign = cd.xa, cd.ya
				anchor := vg.Point{X: q.X + dist*vg.Length(cd.dx), Y: q.Y + dist*vg.Length(cd.dy)}
				box := sty.Rectangle(it.text)
				box = vg.Rectangle{Min: box.Min.Add(anchor), Max: box.Max.Add(anchor)}
				score := 0.0
				if box.Min.X < area.Min.X || box.Max.X > area.Max.X || box.Min.Y < area.Min.Y || box.Max.Y > area.Max.Y {
					score += 100
				}
				for _, t := range taken {
					score += overlap(box, t)
				}
				for _, t := range labels {
					score += 10 * overlap(box, t)
				}
				score += float64(dist) / 1000 // prefer near positions among equals
				if score < bestScore {
					bestScore, best = score, placed{item: it, style: sty, anchor: anchor, box: box, far: ring > 0}
				}
				if score < 1 {
					break search
				}
			}
		}
		taken = append(taken, best.box)
		labels = append(labels, best.box)
		out = append(out, best)
	}
	return out
}

// overlap is the overlapping area of two rectangles in square points (at least 1 when they
// overlap at all).
func overlap(a, b vg.Rectangle) float64 {
	w := math.Min(float64(a.Max.X), float64(b.Max.X)) - math.Max(float64(a.Min.X), float64(b.Min.X))
	h := math.Min(float64(a.Max.Y), float64(b.Max.Y)) - math.Max(float64(a.Min.Y), float64(b.Min.Y))
	if w <= 0 || h <= 0 {
		return 0
	}
	return 1 + w*h
}
