package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/trace"
)

// evalLast is a test model: the last value, with a check that no history it is given can
// reach past its end through the slice's capacity.
type evalLast struct{ leaks *int }

func (evalLast) Name() string                 { return "eval-test-last" }
func (evalLast) MinHistory() int              { return 1 }
func (m evalLast) Clone() forecast.Forecaster { return m }
func (m evalLast) Fit(_ context.Context, h []float64) (forecast.FitReport, error) {
	if cap(h) != len(h) {
		*m.leaks++
	}
	return forecast.FitReport{Model: m.Name(), StopReason: forecast.StopClosedForm}, nil
}
func (m evalLast) Predict(h, dst []float64) error {
	if cap(h) != len(h) {
		*m.leaks++
	}
	for i := range dst {
		dst[i] = h[len(h)-1]
	}
	return nil
}

var evalLeaks int

func init() {
	forecast.Register("eval-test-last", func(forecast.Config) (forecast.Forecaster, error) {
		return evalLast{leaks: &evalLeaks}, nil
	})
}

// evalWave is a short synthetic trace: a period-12 wave on a slow trend.
func evalWave(n int) trace.Trace {
	v := make([]float64, n)
	for i := range v {
		v[i] = 50 + 0.1*float64(i) + 10*math.Sin(2*math.Pi*float64(i)/12) + 3*math.Sin(float64(i)*1.7)
	}
	return trace.Trace{Name: "wave", Class: "periodic", StepMinutes: 5, Values: v}
}

// TestNoLookAhead perturbs every value after an origin and checks that the forecasts at that
// origin and every earlier one are bit-identical, for models that train (lstm, arima) and the
// capacity-checking test model. The forecasts at later origins must change: otherwise the
// perturbation would prove nothing.
func TestNoLookAhead(t *testing.T) {
	base := evalWave(160)
	o, err := Options{
		Traces: []trace.Trace{base}, Horizon: 3, History: 80, Origins: 5, Retrain: 20,
		Config: forecast.Config{Window: 6, Hidden: 4, MaxIterations: 15, TimeBudget: time.Minute, Season: 12},
		Models: []string{"lstm", "arima", "eval-test-last"},
	}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := origins(o, len(base.Values))
	for _, model := range o.Models {
		t.Run(model, func(t *testing.T) {
			_, ref, err := evaluate(context.Background(), o, base, model)
			if err != nil {
				t.Fatal(err)
			}
			for k, t0 := range orig[:len(orig)-1] {
				pert := base
				pert.Values = slices.Clone(base.Values)
				for i := t0 + 1; i < len(pert.Values); i++ {
					pert.Values[i] = 3*pert.Values[i] + 100
				}
				_, got, err := evaluate(context.Background(), o, pert, model)
				if err != nil {
					t.Fatal(err)
				}
				for j := 0; j <= k; j++ {
					if !slices.Equal(got[j], ref[j]) {
						t.Fatalf("origin %d (index %d): forecast changed from %v to %v when values after origin %d changed", j, orig[j], ref[j], got[j], t0)
					}
				}
				if slices.Equal(got[k+1], ref[k+1]) {
					t.Errorf("origin %d: forecast did not change although its history did", orig[k+1])
				}
			}
		})
	}
	if evalLeaks != 0 {
		t.Errorf("%d histories had capacity past the origin", evalLeaks)
	}
}

// TestReportTable scores the last-value model on a linear ramp x_t = t with season 4, where
// every error is known: the naive forecast of t+h from t is off by h, so over horizons 1..2 the
// MAE is 1.5 and MASE against naive is exactly 1 (the model is the naive forecast); the
// seasonal-naive forecast of t+h is x_{t+h−4}, off by 4, so MASE against it is 1.5/4 = 0.375.
func TestReportTable(t *testing.T) {
	ramp := make([]float64, 40)
	for i := range ramp {
		ramp[i] = float64(i)
	}
	opts := Options{
		Traces:  []trace.Trace{{Name: "ramp", StepMinutes: 5, Values: ramp}},
		Models:  []string{"eval-test-last"},
		Horizon: 2, History: 10, Origins: 4,
		Config: forecast.Config{Season: 4},
	}
	tests := []struct {
		format string
		want   []string
	}{
		{"table", []string{"TRACE", "MASE_NAIVE", "ramp", "eval-test-last", " 1.5 ", "1.000", "0.375", "closed-form"}},
		{"markdown", []string{"| trace | class | model |", "| ramp | - | eval-test-last | 4 | 1 | 1.5 | 1.000 | 0.375 |"}},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			var buf bytes.Buffer
			o := opts
			o.Format = tc.format
			if err := Run(context.Background(), o, &buf); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, buf.String())
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var buf bytes.Buffer
		o := opts
		o.Format = "json"
		if err := Run(context.Background(), o, &buf); err != nil {
			t.Fatal(err)
		}
		var rep Report
		if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != 1 {
			t.Fatalf("results %+v", rep.Results)
		}
		r := rep.Results[0]
		if r.Origins != 4 || r.Fits != 1 || r.MAE != 1.5 || r.MASENaive != 1 || r.MASESeasonal != 0.375 {
			t.Errorf("result %+v, want 4 origins, 1 fit, MAE 1.5, MASE 1 and 0.375", r)
		}
	})
}

// TestRunErrors: bad options fail before any work, a trace too short becomes an error row,
// and a canceled context stops Run.
func TestRunErrors(t *testing.T) {
	tr := evalWave(30)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown model", Options{Traces: []trace.Trace{tr}, Models: []string{"nope"}}, "unknown model"},
		{"bad format", Options{Traces: []trace.Trace{tr}, Models: []string{"arima"}, Format: "xml"}, "format"},
		{"no traces", Options{Models: []string{"arima"}}, "no traces"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), tc.opts, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("short trace", func(t *testing.T) {
		var buf bytes.Buffer
		err := Run(context.Background(), Options{Traces: []trace.Trace{tr}, Models: []string{"arima"}, History: 760}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "error: trace has 30 values") {
			t.Errorf("output lacks the short-trace error:\n%s", buf.String())
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := Run(ctx, Options{Traces: []trace.Trace{evalWave(120)}, Models: []string{"arima"}, History: 60}, &bytes.Buffer{})
		if err == nil {
			t.Error("canceled Run: want error")
		}
	})
}
