package scaling

import (
	"errors"
	"math"
	"testing"
	"time"
)

func samples(vals ...float64) []Sample {
	out := make([]Sample, len(vals))
	for i, v := range vals {
		out[i] = Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), Value: v}
	}
	return out
}

func TestStabilize(t *testing.T) {
	nan := math.NaN()
	// Samples at 0,10,…,60 s; now = 60 s, window 60 s → (0 s, 60 s]: the first is excluded.
	now := t0.Add(60 * time.Second)
	for _, tc := range []struct {
		name string
		pol  MetricsPolicy
		vals []float64
		want float64
		err  bool
	}{
		{"average", MetricsPolicy{Aggregation: "average"}, []float64{100, 1, 2, 3, 4, 5, 6}, 3.5, false},
		{"max", MetricsPolicy{Aggregation: "MAX"}, []float64{100, 1, 2, 3, 4, 5, 6}, 6, false},
		{"min", MetricsPolicy{Aggregation: "Min"}, []float64{100, 1, 2, 3, 4, 5, 6}, 1, false},
		// type-7 quantile of 1..6 at 0.9: pos 4.5 → 5.5
		{"p90", MetricsPolicy{Aggregation: "P90"}, []float64{100, 1, 2, 3, 4, 5, 6}, 5.5, false},
		{"ignore missing", MetricsPolicy{}, []float64{0, 2, nan, 4, nan, 6, 8}, 5, false},
		{"missing as zero", MetricsPolicy{MissingData: "treatAsZero"}, []float64{0, 2, nan, 4, nan, 6, 8}, 20.0 / 6, false},
		{"missing fails", MetricsPolicy{MissingData: "Fail"}, []float64{0, 2, nan, 4, 5, 6, 8}, 0, true},
		{"all missing", MetricsPolicy{}, []float64{1, nan, nan, nan, nan, nan, nan}, 0, true},
		// Tukey fences k=1.5 on {1,2,3,4,5,100}: Q1 2.25, Q3 4.75, IQR 2.5 → [−1.5, 8.5]: 100 out.
		{"outlier filtered", MetricsPolicy{OutlierFilter: true}, []float64{0, 1, 2, 3, 4, 5, 100}, 3, false},
		{"outlier kept without filter", MetricsPolicy{}, []float64{0, 1, 2, 3, 4, 5, 100}, 115.0 / 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, _ := tc.pol.Normalize()
			got, err := pol.Stabilize(samples(tc.vals...), now, nil)
			if tc.err {
				if !errors.Is(err, ErrMissingData) {
					t.Fatalf("want ErrMissingData, got %v (%v)", err, got)
				}
				return
			}
			if err != nil || math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestMetricsPolicyInvalidFallsBackWithWarning(t *testing.T) {
	m, warns := MetricsPolicy{Window: -time.Second, Aggregation: "median", MissingData: "drop", OutlierThreshold: -2}.Normalize()
	def := DefaultMetricsPolicy()
	if m.Window != def.Window || m.Aggregation != def.Aggregation || m.MissingData != def.MissingData || m.OutlierThreshold != def.OutlierThreshold {
		t.Fatalf("invalid settings not replaced by defaults: %+v", m)
	}
	if len(warns) != 4 {
		t.Fatalf("want one warning per bad field, got %q", warns)
	}
	for i, f := range []string{"window", "aggregation", "missing_data", "outlier_threshold"} {
		if !contains(warns[i], f) {
			t.Errorf("warning %q does not name %s", warns[i], f)
		}
	}
}
