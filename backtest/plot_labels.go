package backtest

import (
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

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
