// Package eval scores forecast models on traces by rolling-origin evaluation, the accuracy
// report behind `debi forecast eval`. At every origin t a model has seen only the values up to
// and including t (it is trained on the History values ending at t and predicts the Horizon
// values after it), so the report measures what the live system would have forecast.
//
// Errors are reported as MAE and as MASE against two benchmarks computed at the very same
// origins and horizons: the naive forecast (last value) and the seasonal-naive forecast (value
// one season earlier). Below 1 means the model beats the benchmark.
package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/trace"
)

// Options configures Run. Zero values mean the defaults given on each field.
type Options struct {
	// Traces to score every model on.
	Traces []trace.Trace
	// Models are registry names (forecast.Names()).
	Models []string
	// Horizon is how many steps ahead each origin forecasts (default 1); errors are averaged
	// over all of them.
	Horizon int
	// History is how many values, ending at the origin, a model is trained on (default 760,
	// the method's training window).
	History int
	// Origins is how many rolling origins to score, spread evenly from the first origin with
	// a full History to the last one with a full Horizon after it (default 48).
	Origins int
	// Retrain is the number of steps after which a model is refitted at the next origin;
	// 0 fits once, at the first origin, and only predicts afterwards.
	Retrain int
	// Format is "table" (default), "markdown" or "json".
	Format string
	// TimeBudget caps every training run; 0 leaves each model's default.
	TimeBudget time.Duration
	// Config is the base configuration of every model. Season 0 means one day at the
	// trace's step (288 for 5-minute samples), also used by the seasonal-naive benchmark.
	Config forecast.Config
}

// Result is the score of one model on one trace.
type Result struct {
	Trace   string `json:"trace"`
	Class   string `json:"class,omitempty"`
	Model   string `json:"model"`
	Origins int    `json:"origins"`
	Horizon int    `json:"horizon"`
	Fits    int    `json:"fits"`
	// MAE is the mean absolute error over every origin and horizon step.
	MAE float64 `json:"mae"`
	// MASENaive and MASESeasonal are MAE divided by the MAE of the naive and seasonal-naive
	// forecasts at the same origins and horizons.
	MASENaive    float64 `json:"mase_naive"`
	MASESeasonal float64 `json:"mase_seasonal_naive"`
	// FitSeconds is the total training time; StopReason that of the last fit.
	FitSeconds float64 `json:"fit_seconds"`
	StopReason string  `json:"stop_reason,omitempty"`
	// Err is set when the model could not be scored on this trace.
	Err string `json:"error,omitempty"`
}

// Report is the JSON document Run writes with Format "json".
type Report struct {
	Horizon int      `json:"horizon"`
	History int      `json:"history"`
	Origins int      `json:"origins"`
	Retrain int      `json:"retrain"`
	Results []Result `json:"results"`
}

// withDefaults fills defaults and validates.
func (o Options) withDefaults() (Options, error) {
	if o.Horizon == 0 {
		o.Horizon = 1
	}
	if o.History == 0 {
		o.History = 760
	}
	if o.Origins == 0 {
		o.Origins = 48
	}
	if o.Format == "" {
		o.Format = "table"
	}
	switch {
	case o.Horizon < 1:
		return o, fmt.Errorf("horizon %d: must be at least 1", o.Horizon)
	case o.History < 2:
		return o, fmt.Errorf("history %d: must be at least 2", o.History)
	case o.Origins < 1:
		return o, fmt.Errorf("origins %d: must be at least 1", o.Origins)
	case o.Retrain < 0:
		return o, fmt.Errorf("retrain %d: must not be negative", o.Retrain)
	case o.Format != "table" && o.Format != "markdown" && o.Format != "json":
		return o, fmt.Errorf("format %q: want table, markdown or json", o.Format)
	case len(o.Traces) == 0:
		return o, fmt.Errorf("no traces to evaluate")
	case len(o.Models) == 0:
		return o, fmt.Errorf("no models to evaluate")
	}
	for _, m := range o.Models {
		if !forecast.Known(m) {
			return o, fmt.Errorf("unknown model %q (known: %s)", m, strings.Join(forecast.Names(), ", "))
		}
	}
	return o, nil
}

// Run scores every model on every trace and writes the report to w. A model that fails on a
// trace gets a row with its error; Run itself fails only on bad options, cancellation or a
// write error.
func Run(ctx context.Context, opts Options, w io.Writer) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	rep := Report{Horizon: o.Horizon, History: o.History, Origins: o.Origins, Retrain: o.Retrain}
	for _, tr := range o.Traces {
		for _, name := range o.Models {
			r, _, err := evaluate(ctx, o, tr, name)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				r.Err = err.Error()
			}
			rep.Results = append(rep.Results, r)
		}
	}
	return write(w, o.Format, rep)
}

// season returns the seasonal period for tr: Config.Season, else one day of samples.
func season(o Options, tr trace.Trace) int {
	if o.Config.Season > 0 {
		return o.Config.Season
	}
	if tr.StepMinutes > 0 && 1440%tr.StepMinutes == 0 {
		return 1440 / tr.StepMinutes
	}
	return 288
}

// origins returns the origin indices for a series of n values: evenly spread over
// [History−1, n−1−Horizon], the latest last.
func origins(o Options, n int) ([]int, error) {
	first, last := o.History-1, n-1-o.Horizon
	if last < first {
		return nil, fmt.Errorf("trace has %d values, need at least History+Horizon = %d", n, o.History+o.Horizon)
	}
	k := min(o.Origins, last-first+1)
	out := make([]int, k)
	for i := range out {
		if k == 1 {
			out[i] = last
			continue
		}
		out[i] = first + int(math.Round(float64(i)*float64(last-first)/float64(k-1)))
	}
	return out, nil
}

// evaluate scores one model on one trace and also returns its forecasts per origin (for the
// look-ahead test). Histories are passed as slices capped at the origin (x[a:t+1:t+1]), so a
// model cannot reach values after t even through the slice's capacity.
func evaluate(ctx context.Context, o Options, tr trace.Trace, name string) (Result, [][]float64, error) {
	x := tr.Values
	res := Result{Trace: tr.Name, Class: tr.Class, Model: name, Horizon: o.Horizon}
	orig, err := origins(o, len(x))
	if err != nil {
		return res, nil, err
	}
	m := season(o, tr)
	cfg := o.Config
	cfg.Season = m
	if o.TimeBudget > 0 {
		cfg.TimeBudget = o.TimeBudget
	}
	f, err := forecast.New(name, cfg)
	if err != nil {
		return res, nil, err
	}
	var fitTime time.Duration
	lastFit := -1
	var absErr, absNaive, absSeasonal float64
	dst := make([]float64, o.Horizon)
	all := make([][]float64, 0, len(orig))
	for _, t := range orig {
		hist := x[t+1-o.History : t+1 : t+1]
		if lastFit < 0 || (o.Retrain > 0 && t-lastFit >= o.Retrain) {
			rep, err := f.Fit(ctx, hist)
			fitTime += rep.Duration
			res.Fits++
			res.StopReason = rep.StopReason
			if err != nil {
				res.FitSeconds = fitTime.Seconds()
				return res, all, fmt.Errorf("fit at origin %d: %w", t, err)
			}
			lastFit = t
		}
		if err := f.Predict(hist, dst); err != nil {
			return res, all, fmt.Errorf("predict at origin %d: %w", t, err)
		}
		all = append(all, append([]float64(nil), dst...))
		for h := 1; h <= o.Horizon; h++ {
			actual := x[t+h]
			absErr += math.Abs(dst[h-1] - actual)
			absNaive += math.Abs(x[t] - actual)
			// Seasonal naive: the value one season before t+h, stepping back whole seasons
			// until it is at or before the origin; the naive value when the trace is
			// shorter than a season.
			s := t + h - m*((h+m-1)/m)
			if s < 0 {
				s = t
			}
			absSeasonal += math.Abs(x[s] - actual)
		}
	}
	n := float64(len(orig) * o.Horizon)
	res.Origins = len(orig)
	res.MAE = absErr / n
	res.MASENaive = ratio(absErr, absNaive)
	res.MASESeasonal = ratio(absErr, absSeasonal)
	res.FitSeconds = fitTime.Seconds()
	return res, all, nil
}

// ratio is a/b, with a perfect benchmark (b = 0) giving 1 if the model is perfect too and +Inf
// otherwise.
func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

func write(w io.Writer, format string, rep Report) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		// JSON has no Inf or NaN: write them as null through a copy.
		type jr struct {
			Result
			MASENaive    *float64 `json:"mase_naive"`
			MASESeasonal *float64 `json:"mase_seasonal_naive"`
			MAE          *float64 `json:"mae"`
		}
		finite := func(v float64) *float64 {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil
			}
			return &v
		}
		out := struct {
			Report
			Results []jr `json:"results"`
		}{Report: rep}
		for _, r := range rep.Results {
			out.Results = append(out.Results, jr{Result: r, MASENaive: finite(r.MASENaive), MASESeasonal: finite(r.MASESeasonal), MAE: finite(r.MAE)})
		}
		return enc.Encode(out)
	case "markdown":
		fmt.Fprintf(w, "Rolling-origin accuracy: horizon %d, history %d, up to %d origins, retrain %s.\n\n",
			rep.Horizon, rep.History, rep.Origins, retrainText(rep.Retrain))
		fmt.Fprintln(w, "| trace | class | model | origins | fits | MAE | MASE naive | MASE seasonal | fit s | stop |")
		fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
		for _, r := range rep.Results {
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells(r), " | "))
		}
		_, err := fmt.Fprintln(w)
		return err
	default:
		fmt.Fprintf(w, "Rolling-origin accuracy: horizon %d, history %d, up to %d origins, retrain %s.\n",
			rep.Horizon, rep.History, rep.Origins, retrainText(rep.Retrain))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TRACE\tCLASS\tMODEL\tORIGINS\tFITS\tMAE\tMASE_NAIVE\tMASE_SEASONAL\tFIT_S\tSTOP\t")
		for _, r := range rep.Results {
			fmt.Fprintln(tw, strings.Join(cells(r), "\t")+"\t")
		}
		return tw.Flush()
	}
}

func retrainText(r int) string {
	if r == 0 {
		return "never (one fit at the first origin)"
	}
	return fmt.Sprintf("every %d steps", r)
}

// cells formats one result row; an error replaces the scores.
func cells(r Result) []string {
	class := r.Class
	if class == "" {
		class = "-"
	}
	if r.Err != "" {
		return []string{r.Trace, class, r.Model, "-", fmt.Sprint(r.Fits), "-", "-", "-", fmt.Sprintf("%.2f", r.FitSeconds), "error: " + r.Err}
	}
	stop := r.StopReason
	if stop == "" {
		stop = "-"
	}
	return []string{r.Trace, class, r.Model, fmt.Sprint(r.Origins), fmt.Sprint(r.Fits),
		fmt.Sprintf("%.4g", r.MAE), fmt.Sprintf("%.3f", r.MASENaive), fmt.Sprintf("%.3f", r.MASESeasonal),
		fmt.Sprintf("%.2f", r.FitSeconds), stop}
}
