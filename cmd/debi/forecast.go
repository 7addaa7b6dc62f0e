package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/forecast/eval"
	"github.com/debi-scaler/debi/trace"
)

// forecastCommand is `debi forecast eval`.
func forecastCommand(app *kingpin.Application) action {
	cmd := app.Command("forecast", "Forecasting models.").
		Command("eval", "Score every model on traces: MAE, MASE vs naive and seasonal-naive.")
	f := flagger{cmd}
	var traces []string
	cmd.Flag("trace", "Trace CSV file; repeat for several. Default: the embedded traces.").PlaceHolder("FILE").StringsVar(&traces)
	models := strings.Join(forecast.Names(), ",")
	f.str("models", "Comma-separated models to score.", &models)
	o := eval.Options{Horizon: 1, History: 760, Origins: 48, Retrain: 288, Format: "table"}
	o.Config.Seed = 1
	f.int("horizon", "Steps ahead each origin forecasts.", &o.Horizon)
	f.int("history", "Values a model is trained on, ending at the origin.", &o.History)
	f.int("origins", "Rolling origins per trace.", &o.Origins)
	f.int("retrain", "Steps after which a model is refitted at the next origin (0: fit once).", &o.Retrain)
	f.str("format", "Output format: table, markdown or json.", &o.Format)
	f.int("model.season", "Seasonal period in steps (0: one day at the trace's step).", &o.Config.Season)
	f.int64("model.seed", "Training seed.", &o.Config.Seed)
	f.dur("model.time-budget", "Cap on each training run (0: model default).", &o.TimeBudget)
	return func(ctx context.Context, _ *slog.Logger, stdout, stderr io.Writer) int {
		for _, m := range strings.Split(models, ",") {
			if m = strings.TrimSpace(m); m != "" {
				o.Models = append(o.Models, m)
			}
		}
		if len(traces) == 0 {
			ts, err := trace.Embedded()
			if err != nil {
				fmt.Fprintln(stderr, "debi forecast eval:", err)
				return 1
			}
			o.Traces = ts
		}
		for _, name := range traces {
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
}
