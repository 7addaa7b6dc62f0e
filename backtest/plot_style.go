package backtest

import (
	"hash/fnv"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

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

// thumbs draws several thumbnails on top of each other.
type thumbs []plot.Thumbnailer

func (t thumbs) Thumbnail(c *draw.Canvas) {
	for _, th := range t {
		th.Thumbnail(c)
	}
}
