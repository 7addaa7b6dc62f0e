package backtest

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

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
