package eval

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/trace"
)

// BenchmarkEvalEmbedded runs the accuracy report on the embedded traces with every registered
// model and logs the table: the figures quoted in the docs. It takes minutes with the neural
// models' default budgets; run it alone with -benchtime=1x. DEBI_EVAL_MODELS (comma-separated)
// narrows the models. The table goes to stdout: benchmark logs are truncated.
func BenchmarkEvalEmbedded(b *testing.B) {
	if os.Getenv("DEBI_LONG_BENCH") != "1" {
		b.Skip("skipped: the full accuracy report takes about 14 minutes; set DEBI_LONG_BENCH=1 to run it (or use `debi forecast eval`)")
	}
	traces, err := trace.Embedded()
	if err != nil {
		b.Fatal(err)
	}
	var models []string
	for _, m := range forecast.Names() {
		if !strings.HasPrefix(m, "eval-test") {
			models = append(models, m)
		}
	}
	if env := os.Getenv("DEBI_EVAL_MODELS"); env != "" {
		models = strings.Split(env, ",")
	}
	for b.Loop() {
		opts := Options{Traces: traces, Models: models, Horizon: 1, History: 760, Origins: 24, Retrain: 288, Format: "markdown"}
		if err := Run(context.Background(), opts, os.Stdout); err != nil {
			b.Fatal(err)
		}
	}
}
