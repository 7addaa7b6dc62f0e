package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/internal/schema"
	"github.com/debi-scaler/debi/trace"
)

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

// capacityList is a comma-separated list of metric=capacity pairs.
type capacityList map[string]float64

func (c *capacityList) String() string {
	parts := make([]string, 0, len(*c))
	for k, v := range *c {
		parts = append(parts, k+"="+strconv.FormatFloat(v, 'g', -1, 64))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (c *capacityList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		name, val, ok := strings.Cut(p, "=")
		name = strings.TrimSpace(name)
		x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || name == "" || err != nil || !(x > 0) || math.IsInf(x, 0) {
			return fmt.Errorf("%q is not metric=capacity with a positive capacity (e.g. rps=120)", p)
		}
		(*c)[name] = x
	}
	return nil
}

// durationList is a comma-separated list of durations.
type durationList []time.Duration

func (d *durationList) String() string {
	parts := make([]string, len(*d))
	for i, v := range *d {
		parts[i] = shortDuration(v)
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

// shortDuration prints d as time.ParseDuration reads it, without the zero tails of
// Duration.String ("2m", not "2m0s"), for the defaults shown in --help.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// flagger declares the flags of one command with the current value of their destination as the
// default kingpin shows in --help. A value that does not parse is reported with its flag's name
// and in words ("--hpa.target: \"half\" is not a number").
type flagger struct{ cmd *kingpin.CmdClause }

// parsed is a flag value of type T.
type parsed[T any] struct {
	p      *T
	parse  func(string) (T, error)
	format func(T) string
}

func (v parsed[T]) String() string { return v.format(*v.p) }

func (v parsed[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

func parser[T any](f func(string) (T, error), what string) func(string) (T, error) {
	return func(s string) (T, error) {
		x, err := f(strings.TrimSpace(s))
		if err != nil {
			return x, fmt.Errorf("%q is not %s", s, what)
		}
		return x, nil
	}
}

func (f flagger) str(name, help string, p *string) *kingpin.FlagClause {
	fl := f.cmd.Flag(name, help).Default(*p)
	fl.StringVar(p)
	return fl
}

func (f flagger) float(name, help string, p *float64) *kingpin.FlagClause {
	return f.value(name, help, parsed[float64]{p, parser(func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, "a number"),
		func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }})
}

func (f flagger) int(name, help string, p *int) *kingpin.FlagClause {
	return f.value(name, help, parsed[int]{p, parser(strconv.Atoi, "an integer"), strconv.Itoa})
}

func (f flagger) int32(name, help string, p *int32) *kingpin.FlagClause {
	return f.value(name, help, parsed[int32]{p, parser(func(s string) (int32, error) {
		v, err := strconv.ParseInt(s, 10, 32)
		return int32(v), err
	}, "an integer"), func(x int32) string { return strconv.FormatInt(int64(x), 10) }})
}

// param binds a setting to its flag, as its table declares it (schema.Param); section is the
// configuration section of its key ("scaling.", "budget.", "evt.", "forecast."), named in the
// help.
func param[S any](f flagger, section string, d schema.Param[S], s *S) *kingpin.FlagClause {
	help := d.Doc + " (" + section + d.Key + ")"
	switch {
	case d.Float != nil:
		return f.float(d.Flag, help, d.Float(s))
	case d.Dur != nil:
		return f.dur(d.Flag, help, d.Dur(s))
	case d.Int32 != nil:
		return f.int32(d.Flag, help, d.Int32(s))
	case d.Int != nil:
		return f.int(d.Flag, help, d.Int(s))
	case d.Int64 != nil:
		return f.int64(d.Flag, help, d.Int64(s))
	}
	return f.str(d.Flag, help, d.Str(s))
}

// params binds every setting of the table that has a flag, returning the flags by name.
func params[S any](f flagger, section string, table []schema.Param[S], s *S) map[string]*kingpin.FlagClause {
	out := map[string]*kingpin.FlagClause{}
	for _, d := range table {
		if d.Flag != "" {
			out[d.Flag] = param(f, section, d, s)
		}
	}
	return out
}

func (f flagger) int64(name, help string, p *int64) *kingpin.FlagClause {
	return f.value(name, help, parsed[int64]{p, parser(func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, "an integer"),
		func(x int64) string { return strconv.FormatInt(x, 10) }})
}

func (f flagger) dur(name, help string, p *time.Duration) *kingpin.FlagClause {
	return f.value(name, help, parsed[time.Duration]{p, parser(time.ParseDuration, "a duration (e.g. 30s, 2m)"), shortDuration})
}

func (f flagger) value(name, help string, v kingpin.Value) *kingpin.FlagClause {
	fl := f.cmd.Flag(name, help)
	if d := v.String(); d != "" {
		fl = fl.Default(d)
	}
	fl.SetValue(namedValue{name, v})
	return fl
}

// namedValue prefixes the errors of a flag value with the flag's name.
type namedValue struct {
	name string
	kingpin.Value
}

func (v namedValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return fmt.Errorf("--%s: %w", v.name, err)
	}
	return nil
}

// policyForms are the policy names policy.Parse accepts, <model> standing for any name of
// forecast.Names(): the list --policies shows (TestPolicyForms holds it to policy.Parse).
var policyForms = []string{"budget", "<model>-budget", "hpa", "apa", "debi", "<model>-debi", "<model>-hpa", "evt-<model>-hpa"}

// backtestFlags binds every parameter of METHOD §7 to a flag, grouped by prefix as the
// Prometheus family does (the run, the simulated cluster, then hpa.*, apa.*, debi.*, evt.*,
// budget.*, model.*). Spans of time are durations (--startup-delay=2m); counts of trace
// samples say so. finish converts the values that need it after parsing.
func backtestFlags(cmd *kingpin.CmdClause, o *backtest.Options) (traces *[]string, policies, format, plots *string, finish func()) {
	f := flagger{cmd}
	traces = new([]string)
	cmd.Flag("trace", "Trace CSV file (minute,value, or minute,<metric1>,<metric2>,… for a policy on several metrics); repeat for several. Default: the embedded CC-BY-4.0 traces.").PlaceHolder("FILE").StringsVar(traces)
	capacity := capacityList{}
	f.cmd.Flag("trace.capacity", "Capacity of one pod per metric of a multi-metric trace, in the trace's unit (e.g. rps=120,cpu=0.5); a metric without one is scaled as a one-metric trace (--peak-utilization).").PlaceHolder("METRIC=V,…").SetValue(namedValue{"trace.capacity", &capacity})
	policies, format, plots = new(string), new(string), new(string)
	*policies, *format = strings.Join(o.Policies, ","), "summary"
	f.str("policies", "Comma-separated policies: "+strings.Join(policyForms, ", ")+", "+backtest.OraclePolicy+"; models: "+strings.Join(forecast.Names(), ", ")+" (the oracle and the HPA sweep always run).", policies)
	f.str("format", "Output format: "+strings.Join(backtest.Formats, ", ")+".", format)
	cmd.Flag("plots", "Directory to write PNG plots into (per trace: replicas per policy, the largest burst, cost vs overload).").PlaceHolder("DIR").StringVar(plots)
	sweep := floatList(o.SweepTargets)
	f.value("sweep", "HPA targets of the cost-at-equal-overload frontier.", &sweep)
	o.MaxSteps, o.Parallel = 0, 0
	f.int("max-steps", "Truncate every trace to this many samples (0: whole trace).", &o.MaxSteps)
	f.int("parallel", "Runs at once (0: GOMAXPROCS).", &o.Parallel)

	// The simulated cluster and the scoring.
	p := &o.Params
	f.float("request", "R: CPU request of one pod (cores).", &o.Request)
	f.float("activation", "With --min-replicas 0: demand at or below this many pods' worth of R counts as idle, and wakes the workload above it (KEDA's activationThreshold).", &o.Activation)
	f.dur("tick", "Controllers' sync period: every policy decides once per tick.", &o.Tick)
	f.dur("sample-period", "Time between trace samples (0: from the trace's minute column).", &o.SamplePeriod)
	f.str("demand", "Demand between samples: linear or step.", &o.Demand)
	f.str("overload-count", "What every figure judges overload on: tick (the demand at each tick against the pods ready then) or time (the share of each interval between ticks overloaded; a pod serves from the tick it arrives at).", &o.Overload)
	f.dur("metric-window", "Observation lag: policies see the mean demand over this window (0: instantaneous).", &o.MetricWindow)
	f.float("peak-utilization", "Demand scale: the p99 of the warm-up maps to this fraction of N_max·R.", &o.PeakUtilization)
	f.float("scale", "Demand = trace value × scale (overrides --peak-utilization).", &o.Scale)
	f.dur("startup-delay", "Time before a new pod serves.", &o.StartupDelay)
	f.dur("startup-spread", "Start-ups that vary: each new pod serves after --startup-delay plus an exponential extra whose 0.9 quantile is this (policies size for --startup-delay plus it; 0: every pod takes exactly --startup-delay).", &o.StartupSpread)
	sweepStartup := durationList(o.StartupSweep)
	f.value("startup-sweep", "Also run everything at these start-up delays for the per-class summary (e.g. 30s,2m,5m).", &sweepStartup)
	f.dur("decision-delay", "Time from a decision to the deployment's new size (a live pipeline's delay).", &o.DecisionDelay)
	f.int("warmup", "Trace samples that train models and are not scored.", &o.Warmup)
	f.float("sla-utilization", "u_sla: overloaded when D > u_sla·Nr·R.", &o.SLAUtilization)
	f.int("horizon", "Forecast horizon h in samples (0: ceil((decision delay + start-up delay)/period) + 1).", &o.Horizon)
	f.int("history", "Trace samples of history the models and EVT see.", &o.History)
	f.dur("retrain", "Time between model training runs (0: once).", &o.Retrain)
	f.dur("season", "Seasonal period of the seasonal models, converted to samples of each trace.", &o.Season)

	// The settings of scaling.Params, of the POT fit, of the calibration and of the models, each as
	// its table declares it (the configuration's key, bounds and doc are the same).
	params(f, "scaling.", p.Table(), p)
	f.str("debi.model", "Forecaster of the debi policy.", &o.DebiModel)
	f.str("budget.model", "Forecaster of the budget policy (auto: the one of Holt-Winters, ARIMA and the last value that has forecast the recent history best).", &o.BudgetModel)
	params(f, "evt.", o.POT.Table(), &o.POT)
	neighboursSet := new(bool)
	params(f, "budget.", o.Calibration.Table(), &o.Calibration)["budget.quantile-neighbours"].IsSetByUser(neighboursSet)
	f.str("budget.metric-calibration", "On a trace with several metrics: calibrate the budget jointly on the policy's overload (joint, the default when empty) or each metric on its own (per-metric).", &o.MetricCalibration)

	o.Model.Season, o.Model.Window, o.Model.Hidden, o.Model.MaxIterations, o.Model.TimeBudget, o.Model.Seed = 0, 0, 0, 0, 0, 1
	params(f, "forecast.", o.Model.Table(), &o.Model)
	f.str("model.fallback", "A model that forecasts while the policy's model waits for the history it needs (Holt-Winters: two seasons), e.g. arima. Backtest only.", &o.Fallback)
	finish = func() {
		o.Calibration = o.Calibration.WithMethodDefaults(*neighboursSet)
		o.SweepTargets = sweep
		o.StartupSweep = sweepStartup
		if len(capacity) > 0 {
			o.Capacity = capacity
		}
	}
	return
}

func backtestCommand(app *kingpin.Application) action {
	cmd := app.Command("backtest", "Replay traces through scaling policies and print the paper's comparison (on the embedded traces by default).")
	o := backtest.DefaultOptions()
	traces, policies, format, plots, finish := backtestFlags(cmd, &o)
	// What-if on real history: the configured policy replayed on what Prometheus recorded.
	var w whatIf
	cmd.Flag("config.file", "What-if: replay a policy of this debi configuration on the demand Prometheus recorded (instead of traces).").PlaceHolder("FILE").StringVar(&w.configFile)
	cmd.Flag("policy", "What-if: the policy of --config.file to replay (default: its only one).").PlaceHolder("NAME").StringVar(&w.policy)
	cmd.Flag("prometheus.url", "What-if: the Prometheus to read the history from (default: global.prometheus_url; global.http_config applies).").PlaceHolder("URL").StringVar(&w.promURL)
	rng := cmd.Flag("range", "What-if: how far back to replay, ending now (or at --range.end), in Prometheus's duration format (7d, 36h).").Default("7d").String()
	cmd.Flag("range.step", "What-if: the step of the history (default: the policy's history_step).").Default("0s").DurationVar(&w.step)
	end := cmd.Flag("range.end", "What-if: the end of the range, RFC 3339 (default: now).").PlaceHolder("TIME").String()
	// Positional arguments are a mistake (traces go in --trace): caught here to say so.
	stray := cmd.Arg("stray", "").Hidden().Strings()
	return func(ctx context.Context, _ *slog.Logger, stdout, stderr io.Writer) int {
		if len(*stray) > 0 {
			fmt.Fprintf(stderr, "debi backtest: unexpected argument %q (traces go in --trace)\n", (*stray)[0])
			return 2
		}
		finish()
		if w.configFile == "" {
			return runBacktest(ctx, o, *traces, *policies, *format, *plots, nil, stdout, stderr)
		}
		if len(*traces) > 0 {
			fmt.Fprintln(stderr, "debi backtest: --trace and --config.file are exclusive: traces, or the recorded history of a policy")
			return 2
		}
		if *end != "" {
			t, err := time.Parse(time.RFC3339, *end)
			if err != nil {
				fmt.Fprintf(stderr, "debi backtest: --range.end: %q is not an RFC 3339 time (e.g. 2026-11-24T00:00:00Z)\n", *end)
				return 2
			}
			w.end = t
		}
		d, err := model.ParseDuration(*rng)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "debi backtest: --range: %q is not a positive duration (e.g. 7d, 36h)\n", *rng)
			return 2
		}
		w.rng = time.Duration(d)
		o.Policies = splitList(*policies)
		ts, wo, err := whatIfTraces(ctx, w, o)
		if err != nil {
			fmt.Fprintln(stderr, "debi backtest:", err)
			return 1
		}
		return runBacktest(ctx, wo, nil, strings.Join(wo.Policies, ","), *format, *plots, ts, stdout, stderr)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// runBacktest runs the comparison on the given traces (loaded: the what-if), else on the trace
// files, else on the embedded traces.
func runBacktest(ctx context.Context, o backtest.Options, traces []string, policies, format, plots string, loaded []trace.Trace, stdout, stderr io.Writer) int {
	o.Policies = splitList(policies)
	o.KeepSeries = plots != ""
	ts := loaded
	if len(traces) == 0 && len(loaded) == 0 {
		var err error
		if ts, err = trace.Embedded(); err != nil {
			fmt.Fprintln(stderr, "debi backtest:", err)
			return 1
		}
	}
	for _, name := range traces {
		t, err := trace.LoadFile(name)
		if err != nil {
			fmt.Fprintln(stderr, "debi backtest: --trace:", err)
			return 1
		}
		ts = append(ts, t)
	}
	if !contains(backtest.Formats, format) {
		fmt.Fprintf(stderr, "debi backtest: --format: %q is not one of %s\n", format, strings.Join(backtest.Formats, ", "))
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
	if err := rep.Write(stdout, format); err != nil {
		fmt.Fprintln(stderr, "debi backtest:", err)
		return 1
	}
	if plots != "" {
		files, err := rep.WritePlots(plots)
		if err != nil {
			fmt.Fprintln(stderr, "debi backtest: --plots:", err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %d plots to %s\n", len(files), plots)
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
