package backtest

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

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

	legend, err := addSweep(p, lay, lsty, tr.Frontier, xs, yOf)
	if err != nil {
		return nil, err
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

	return drawFrontier(p, xlabel, legend, relative), nil
}

// addSweep draws the sweep of fixed HPA targets on p, its points on the lower envelope filled,
// each labelled with its target on lay, and returns their legend entries (xs scales an overload
// fraction to the x axis, yOf a cost to the y axis).
func addSweep(p *plot.Plot, lay *labelLayer, lsty text.Style, frontier []FrontierPoint, xs float64, yOf func(float64) float64) ([]legendItem, error) {
	var legend []legendItem
	sw := slices.Clone(frontier)
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
	return legend, nil
}

// drawFrontier draws the frontier plot p with its x label under it and the legend column on
// the right.
func drawFrontier(p *plot.Plot, xlabel string, legend []legendItem, relative bool) *vgimg.Canvas {
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
	return img
}

func costText(r Run, relative bool) string {
	if relative {
		return f3(r.CostRatio) + "× hpa"
	}
	return fmt.Sprintf("%.0f core-h", r.Cost)
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

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
