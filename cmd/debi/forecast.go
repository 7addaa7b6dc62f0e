package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/forecast/eval"
	"github.com/debi-scaler/debi/trace"
)

func runForecast(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "eval" {
		fmt.Fprintln(stderr, "usage: debi forecast eval [flags]   (score every model on traces: MAE, MASE vs naive and seasonal-naive)")
		if len(args) == 0 {
			return 2
		}
		if args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("debi forecast eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	traces := &stringList{}
	fs.Var(traces, "trace", "trace CSV file; repeat for several; default: the embedded traces")
	models := fs.String("models", strings.Join(forecast.Names(), ","), "comma-separated models to score")
	var o eval.Options
	fs.IntVar(&o.Horizon, "horizon", 1, "steps ahead each origin forecasts")
	fs.IntVar(&o.History, "history", 760, "values a model is trained on, ending at the origin")
	fs.IntVar(&o.Origins, "origins", 48, "rolling origins per trace")
	fs.IntVar(&o.Retrain, "retrain", 288, "steps after which a model is refitted at the next origin (0: fit once)")
	fs.StringVar(&o.Format, "format", "table", "output format: table, markdown or json")
	fs.DurationVar(&o.TimeBudget, "model.time-budget", 0, "cap on each training run (0: model default)")
	fs.IntVar(&o.Config.Season, "model.season", 0, "seasonal period in steps (0: one day at the trace's step)")
	fs.Int64Var(&o.Config.Seed, "model.seed", 1, "training seed")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	for _, m := range strings.Split(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Models = append(o.Models, m)
		}
	}
	if len(*traces) == 0 {
		ts, err := trace.Embedded()
		if err != nil {
			fmt.Fprintln(stderr, "debi forecast eval:", err)
			return 1
		}
		o.Traces = ts
	}
	for _, name := range *traces {
		t, err := trace.LoadFile(name)
		if err != nil {
			fmt.Fprintln(stderr, "debi forecast eval: --trace:", err)
			return 1
		}
		o.Traces = append(o.Traces, t)
	}
	if err := eval.Run(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "debi forecast eval:", err)
		return 1
	}
	return 0
}
