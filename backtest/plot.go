package backtest

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots writes two PNGs per trace into dir: <trace>-replicas.png, the demand (in pods at
// full use, D/R) and each policy's replicas over the scored steps (the paper's Figs. 13–15), and
// (the first plotSteps scored steps), and <trace>-frontier.png, cost against overload fraction for each policy with the HPA-target sweep
// and its envelope. The report must come from a run with Options.KeepSeries.
func (rep *Report) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, tr := range rep.Traces {
		f1 := filepath.Join(dir, tr.Trace+"-replicas.png")
		if err := rep.plotReplicas(tr, f1); err != nil {
			return files, fmt.Errorf("plot %s: %w", f1, err)
		}
		f2 := filepath.Join(dir, tr.Trace+"-frontier.png")
		if err := plotFrontier(tr, f2); err != nil {
			return files, fmt.Errorf("plot %s: %w", f2, err)
		}
		files = append(files, f1, f2)
	}
	return files, nil
}

// plotSteps is the stretch of scored steps the replica plot shows: enough for a few daily cycles
// of 5-minute data while each scaling action stays visible.
const plotSteps = 1000

func (rep *Report) plotReplicas(tr TraceResult, file string) error {
	p := plot.New()
	from := rep.Options.Warmup
	to := min(from+plotSteps, tr.Steps)
	p.Title.Text = fmt.Sprintf("%s (%s): demand and replicas, steps %d–%d", tr.Trace, tr.Class, from, to)
	p.X.Label.Text = "step"
	p.Y.Label.Text = "pods"
	p.Legend.Top = true
	for i, r := range tr.Runs {
		if r.Series == nil {
			return fmt.Errorf("run %s has no series (backtest without plots)", r.Policy)
		}
		if i == 0 {
			pts := make(plotter.XYs, 0, to-from)
			for t := from; t < to; t++ {
				pts = append(pts, plotter.XY{X: float64(t), Y: r.Series.Demand[t] / rep.Options.Request})
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.Color = color.Gray{Y: 90}
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add("demand D/R", l)
		}
		pts := make(plotter.XYs, 0, to-from)
		for t := from; t < to; t++ {
			pts = append(pts, plotter.XY{X: float64(t), Y: float64(r.Series.Replicas[t])})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(0.8)
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	return p.Save(16*vg.Inch, 6*vg.Inch, file)
}

func plotFrontier(tr TraceResult, file string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: cost vs overload (HPA target sweep = frontier)", tr.Trace)
	p.X.Label.Text = "overload fraction"
	p.Y.Label.Text = "cost (core-steps)"
	var sweep, env plotter.XYs
	for _, f := range tr.Frontier {
		sweep = append(sweep, plotter.XY{X: f.OverloadFraction, Y: f.Cost})
	}
	for _, f := range Envelope(tr.Frontier) {
		env = append(env, plotter.XY{X: f.OverloadFraction, Y: f.Cost})
	}
	if len(sweep) > 0 {
		s, err := plotter.NewScatter(sweep)
		if err != nil {
			return err
		}
		s.Color = color.Gray{Y: 120}
		p.Add(s)
		p.Legend.Add("hpa sweep", s)
		l, err := plotter.NewLine(env)
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 60}
		p.Add(l)
		p.Legend.Add("envelope", l)
	}
	for i, r := range tr.Runs {
		s, err := plotter.NewScatter(plotter.XYs{{X: r.OverloadFraction, Y: r.Cost}})
		if err != nil {
			return err
		}
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		s.Radius = vg.Points(4)
		p.Add(s)
		p.Legend.Add(r.Policy, s)
	}
	return p.Save(8*vg.Inch, 6*vg.Inch, file)
}
