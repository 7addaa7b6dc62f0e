package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	kingpin "github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/internal/demo"
	"github.com/debi-scaler/debi/trace"
)

// demoFlags are the HPA parameters `debi demo openmetrics` takes, by their backtest flag, with
// their help where the backtest's (every algorithm's) does not say it for the simulated HPA.
var demoFlags = map[string]string{
	"min-replicas": "The HPA's minReplicas.", "max-replicas": "The HPA's maxReplicas (and, through --peak-utilization, the demand's scale).",
	"hpa.target": "The HPA's target CPU utilization.", "tolerance": "", "hpa.behavior": "", "hpa.scale-down-stabilization": "",
}

// demoCommand is `debi demo openmetrics`: a trace as the series a cluster would have recorded
// under an HPA, for promtool tsdb create-blocks-from openmetrics, so that the what-if runs on a
// laptop (docs/getting-started.md, "Try the what-if on a laptop").
func demoCommand(app *kingpin.Application) action {
	cmd := app.Command("demo", "Try debi without a cluster.").
		Command("openmetrics", "Write a trace as the cAdvisor and kube-state-metrics series of a deployment scaled by a simulated HPA, "+
			"in OpenMetrics for promtool tsdb create-blocks-from openmetrics, ending now: the what-if's input without a cluster.")
	o := demo.DefaultOptions()
	f := flagger{cmd}
	traceFile := cmd.Flag("trace", "Trace CSV file (minute,value). Default: the first embedded trace.").PlaceHolder("FILE").String()
	f.str("namespace", "Namespace of the workload in the series.", &o.Namespace)
	f.str("deployment", "Deployment name of the workload in the series.", &o.Deployment)
	f.str("container", "Container name of the workload's pods.", &o.Container)
	f.float("request", "CPU request of one pod (cores).", &o.Sim.Request)
	for _, d := range o.Sim.Params.Table() {
		if help, ok := demoFlags[d.Flag]; ok {
			if help != "" {
				d.Doc = help
			}
			param(f, "scaling.", d, &o.Sim.Params)
		}
	}
	f.dur("startup-delay", "Time before a new pod is ready.", &o.Sim.StartupDelay)
	f.dur("startup-spread", "Start-ups that vary: each new pod is ready after --startup-delay plus an exponential extra whose 0.9 quantile is this (0: exactly --startup-delay).", &o.Sim.StartupSpread)
	f.float("peak-utilization", "Demand scale, as debi backtest's: the p99 of the trace's first --warmup samples maps to this fraction of --max-replicas × --request.", &o.Sim.PeakUtilization)
	f.float("scale", "Demand in cores = trace value × scale (overrides --peak-utilization).", &o.Sim.Scale)
	f.int("warmup", "Trace samples whose p99 sets the demand scale (as debi backtest's --warmup).", &o.Sim.Warmup)
	rng := cmd.Flag("range", "How much of the trace's end to write, ending at --end, in Prometheus's duration format (0: the whole trace; keep it within the Prometheus's retention).").Default("7d").String()
	end := cmd.Flag("end", "Time of the last sample, RFC 3339 (default: now).").PlaceHolder("TIME").String()
	f.dur("scrape-interval", "Time between samples (15s or 30s: rate(...[1m]) needs two).", &o.ScrapeInterval)
	return func(ctx context.Context, _ *slog.Logger, stdout, stderr io.Writer) int {
		d, err := model.ParseDuration(*rng)
		if err != nil {
			fmt.Fprintf(stderr, "debi demo openmetrics: --range: %q is not a duration (e.g. 7d, 36h, 0)\n", *rng)
			return 2
		}
		o.Range = time.Duration(d)
		if *end != "" {
			t, err := time.Parse(time.RFC3339, *end)
			if err != nil {
				fmt.Fprintf(stderr, "debi demo openmetrics: --end: %q is not an RFC 3339 time (e.g. 2026-11-24T00:00:00Z)\n", *end)
				return 2
			}
			o.End = t
		}
		var tr trace.Trace
		if *traceFile == "" {
			ts, err := trace.Embedded()
			if err != nil || len(ts) == 0 {
				fmt.Fprintln(stderr, "debi demo openmetrics: the embedded traces:", err)
				return 1
			}
			tr = ts[0]
		} else if tr, err = trace.LoadFile(*traceFile); err != nil {
			fmt.Fprintln(stderr, "debi demo openmetrics: --trace:", err)
			return 1
		}
		dm, err := demo.Build(ctx, tr, o)
		if err != nil {
			fmt.Fprintln(stderr, "debi demo openmetrics:", flagName(err))
			return 1
		}
		if err := dm.WriteOpenMetrics(stdout); err != nil {
			fmt.Fprintln(stderr, "debi demo openmetrics:", err)
			return 1
		}
		fmt.Fprintf(stderr, "debi demo openmetrics: trace %s from %s to %s, demand ×%.4g cores, an HPA at %g with up to %d replicas; next: promtool tsdb create-blocks-from openmetrics FILE DATA_DIR\n",
			tr.Name, dm.Start.UTC().Format(time.RFC3339), dm.End.UTC().Format(time.RFC3339), dm.Scale, o.Sim.Params.Target, dm.Pods)
		return 0
	}
}
