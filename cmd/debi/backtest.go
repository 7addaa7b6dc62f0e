package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// floatList is a comma-separated list of numbers.
type floatList []float64

func (f *floatList) String() string {
	parts := make([]string, len(*f))
	for i, v := range *f {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (f *floatList) Set(v string) error {
	var out []float64
	for _, p := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", p)
		}
		out = append(out, x)
	}
	*f = out
	return nil
}

// durationList is a comma-separated list of durations.
type durationList []time.Duration

func (d *durationList) String() string {
	parts := make([]string, len(*d))
	for i, v := range *d {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

func (d *durationList) Set(v string) error {
	var out []time.Duration
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		x, err := time.ParseDuration(p)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 30s, 2m)", p)
		}
		out = append(out, x)
	}
	*d = out
	return nil
}

// backtestFlags binds every parameter of METHOD §7 to a flag. Spans of time are durations
// (--startup-delay 2m); counts of trace samples say so.
func backtestFlags(fs *flag.FlagSet, o *backtest.Options) (traces *stringList, policies, format, plots *string) {
	traces = &stringList{}
	fs.Var(traces, "trace", "trace CSV file (`minute,value`); repeat for several; default: the embedded CC-BY-4.0 traces")
	policies = fs.String("policies", strings.Join(o.Policies, ","), "comma-separated policies: hpa, apa, debi, oracle, <model>-debi, <model>-hpa, evt-<model>-hpa; models: "+strings.Join(forecast.Names(), ", ")+" (the oracle and the HPA sweep always run)")
	format = fs.String("format", "summary", "output format: "+strings.Join(backtest.Formats, ", "))
	plots = fs.String("plots", "", "directory to write PNG plots into (per trace: replicas per policy, the largest burst, cost vs overload)")
	fs.StringVar(&o.DebiModel, "debi.model", o.DebiModel, "forecaster of the debi policy")
	fs.Float64Var(&o.Request, "request", o.Request, "R: CPU request of one pod (cores)")
	p := &o.Params
	var minR, maxR int
	fs.IntVar(&minR, "min-replicas", int(p.MinReplicas), "N_min")
	fs.IntVar(&maxR, "max-replicas", int(p.MaxReplicas), "N_max")
	fs.Float64Var(&p.Target, "hpa.target", p.Target, "HPA (and APA) target utilization")
	behavior := fs.String("hpa.behavior", string(p.HPABehavior), "HPA modelled: none (no behavior field, as kubectl autoscale creates) or default (behavior = the API defaults)")
	fs.Float64Var(&p.Tolerance, "tolerance", p.Tolerance, "Δ: tolerance of hpa and debi")
	fs.Float64Var(&p.Lower, "debi.lower", p.Lower, "U_lower: dynamic target at N_min")
	fs.Float64Var(&p.Upper, "debi.upper", p.Upper, "U_upper: dynamic target limit")
	rounding := fs.String("debi.rounding", string(p.Rounding), "Algorithm 2 rounding: nearest or ceil")
	fs.DurationVar(&p.Window, "debi.window", p.Window, "debi observation window (0 disables)")
	fs.DurationVar(&p.ScaleDownStabilization, "hpa.scale-down-stabilization", p.ScaleDownStabilization, "HPA scale-down stabilisation window")
	fs.Float64Var(&p.UpTolerance, "apa.up-tolerance", p.UpTolerance, "APA up tolerance")
	fs.Float64Var(&p.DownTolerance, "apa.down-tolerance", p.DownTolerance, "APA down tolerance")
	fs.Float64Var(&p.MaxScaleUpRate, "apa.max-scale-up-rate", p.MaxScaleUpRate, "APA maximum scale-up factor per decision")
	fs.Float64Var(&p.MaxScaleDownRate, "apa.max-scale-down-rate", p.MaxScaleDownRate, "APA maximum scale-down factor per decision")
	fs.DurationVar(&o.Tick, "tick", o.Tick, "controllers' sync period: every policy decides once per tick")
	fs.DurationVar(&o.SamplePeriod, "sample-period", o.SamplePeriod, "time between trace samples (0: from the trace's minute column)")
	fs.StringVar(&o.Demand, "demand", o.Demand, "demand between samples: linear or step")
	fs.DurationVar(&o.MetricWindow, "metric-window", o.MetricWindow, "observation lag: policies see the mean demand over this window (0: instantaneous)")
	fs.Float64Var(&o.PeakUtilization, "peak-utilization", o.PeakUtilization, "demand scale: the p99 of the warm-up maps to this fraction of N_max·R")
	fs.Float64Var(&o.Scale, "scale", o.Scale, "demand = trace value × scale (overrides --peak-utilization)")
	fs.DurationVar(&o.StartupDelay, "startup-delay", o.StartupDelay, "time before a new pod serves")
	sweepStartup := durationList(o.StartupSweep)
	fs.Var(&sweepStartup, "startup-sweep", "also run everything at these start-up delays for the per-class summary (e.g. 30s,2m,5m)")
	fs.DurationVar(&o.DecisionDelay, "decision-delay", o.DecisionDelay, "time from a decision to the deployment's new size (a live pipeline's delay)")
	fs.IntVar(&o.Warmup, "warmup", o.Warmup, "trace samples that train models and are not scored")
	fs.Float64Var(&o.SLAUtilization, "sla-utilization", o.SLAUtilization, "u_sla: overloaded when D > u_sla·Nr·R")
	fs.IntVar(&o.Horizon, "horizon", o.Horizon, "forecast horizon h in samples (0: ceil((decision delay + start-up delay)/period) + 1)")
	fs.IntVar(&o.History, "history", o.History, "trace samples of history the models and EVT see")
	fs.DurationVar(&o.Retrain, "retrain", o.Retrain, "time between model training runs (0: once)")
	fs.DurationVar(&o.Season, "season", o.Season, "seasonal period of the seasonal models, converted to samples of each trace")
	fs.Float64Var(&o.POT.Tau, "evt.tau", o.POT.Tau, "τ: tail fraction of the EVT threshold")
	fs.Float64Var(&o.POT.Q, "evt.q", o.POT.Q, "q: risk of the high-water level (must be below τ)")
	fs.IntVar(&o.POT.MinExcesses, "evt.min-excesses", o.POT.MinExcesses, "fewest excesses for a GPD fit")
	fs.StringVar(&o.POT.Method, "evt.method", o.POT.Method, "GPD fit: moments or grimshaw")
	c := &o.Calibration
	fs.Float64Var(&c.Budget, "budget.overload-budget", c.Budget, "budget: the share of time the workload may run above u_sla")
	fs.Float64Var(&c.Gain, "budget.calibration-gain", c.Gain, "budget: γ of the online calibration α ← α + γ·(budget − overloaded), per tick (0: fixed α)")
	fs.StringVar(&c.Method, "budget.quantile", c.Method, "budget: quantile of the forecast errors: pot (GPD tail) or empirical")
	fs.StringVar(&c.Errors, "budget.errors", c.Errors, "budget: forecast errors as ratio (ln actual/forecast), additive (cores) or scaled (cores over the mean level)")
	fs.StringVar(&c.Scoring, "budget.scoring", c.Scoring, "budget: score forecasts at every tick (the demand at t + lead time, anchored at the observation) or once per sample")
	fs.IntVar(&c.Window, "budget.error-window", c.Window, "budget: forecast errors kept (history steps)")
	fs.DurationVar(&p.Budget.Hold, "budget.hold", p.Budget.Hold, "budget: least time since the last change of size before a scale-down")
	fs.Float64Var(&p.Budget.MinSaving, "budget.min-saving", p.Budget.MinSaving, "budget: least share of the size a scale-down must save (besides one pod)")
	fs.IntVar(&o.Model.Season, "model.season", 0, "seasonal period in samples (0: --season converted)")
	fs.IntVar(&o.Model.Window, "model.window", 0, "input window L of the neural models (0: default)")
	fs.IntVar(&o.Model.Hidden, "model.hidden", 0, "hidden units per direction (0: default)")
	fs.IntVar(&o.Model.MaxIterations, "model.max-iterations", 0, "training iteration cap (0: default)")
	fs.DurationVar(&o.Model.TimeBudget, "model.time-budget", 0, "training time budget per run (0: default)")
	fs.Int64Var(&o.Model.Seed, "model.seed", 1, "training seed")
	sweep := floatList(o.SweepTargets)
	fs.Var(&sweep, "sweep", "HPA targets of the cost-at-equal-overload frontier")
	fs.IntVar(&o.MaxSteps, "max-steps", 0, "truncate every trace to this many samples (0: whole trace)")
	fs.IntVar(&o.Parallel, "parallel", 0, "runs at once (0: GOMAXPROCS)")
	// Resolve the values that need conversion after parsing.
	postParse = func() {
		p.MinReplicas, p.MaxReplicas, p.Rounding = int32(minR), int32(maxR), scaling.Rounding(*rounding)
		p.HPABehavior = scaling.HPABehavior(*behavior)
		o.SweepTargets = sweep
		o.StartupSweep = sweepStartup
	}
	return
}

var postParse func()

func runBacktest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("debi backtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := backtest.DefaultOptions()
	traces, policies, format, plots := backtestFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "debi backtest: unexpected argument %q (traces go in --trace)\n", fs.Arg(0))
		return 2
	}
	postParse()
	o.Policies = nil
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.Policies = append(o.Policies, p)
		}
	}
	o.KeepSeries = *plots != ""
	var ts []trace.Trace
	if len(*traces) == 0 {
		var err error
		if ts, err = trace.Embedded(); err != nil {
			fmt.Fprintln(stderr, "debi backtest:", err)
			return 1
		}
	}
	for _, name := range *traces {
		t, err := trace.LoadFile(name)
		if err != nil {
			fmt.Fprintln(stderr, "debi backtest: --trace:", err)
			return 1
		}
		ts = append(ts, t)
	}
	if !contains(backtest.Formats, *format) {
		fmt.Fprintf(stderr, "debi backtest: --format: %q is not one of %s\n", *format, strings.Join(backtest.Formats, ", "))
		return 2
	}
	if isTerminal(stderr) {
		start := time.Now()
		o.Progress = func(done, total int) { progressBar(stderr, done, total, start) }
	}
	for _, w := range backtest.HistoryWarnings(ts, o) {
		fmt.Fprintln(stderr, "debi backtest: warning:", w)
	}
	rep, err := backtest.RunTraces(ctx, ts, o)
	if err != nil {
		fmt.Fprintln(stderr, "debi backtest:", flagName(err))
		return 1
	}
	if err := rep.Write(stdout, *format); err != nil {
		fmt.Fprintln(stderr, "debi backtest:", err)
		return 1
	}
	if *plots != "" {
		files, err := rep.WritePlots(*plots)
		if err != nil {
			fmt.Fprintln(stderr, "debi backtest: --plots:", err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %d plots to %s\n", len(files), *plots)
	}
	return 0
}

// flagName prefixes option errors ("request: …") with the dashes of the flag they came from.
func flagName(err error) string {
	s := err.Error()
	if i := strings.Index(s, ":"); i > 0 && !strings.ContainsAny(s[:i], " /") {
		return "--" + strings.ReplaceAll(s[:i], "_", "-") + s[i:]
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func progressBar(w io.Writer, done, total int, start time.Time) {
	const width = 30
	n := done * width / total
	fmt.Fprintf(w, "\r[%s%s] %d/%d runs %s", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, time.Since(start).Round(time.Second))
	if done == total {
		fmt.Fprintln(w)
	}
}
