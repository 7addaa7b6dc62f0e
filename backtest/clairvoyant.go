package backtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
)

// ClairvoyantPrefix names the diagnostic budget policies clairvoyant-<d>-budget: the budget
// policy on a forecaster that knows the future demand smoothed over d (a centred moving mean
// of width d) and nothing finer. It is a yardstick, not a policy a user can pick: the share of
// the oracle's saving it reaches is what perfect knowledge of the slow component of the load
// (its forecastable structure) is worth; what it leaves is the noise faster than d, which no
// forecast of that component can remove (docs/results-budget.md).
const ClairvoyantPrefix = "clairvoyant-"

// ParseClairvoyant returns d for a policy named clairvoyant-<d>-budget; ok is false for any
// other name.
func ParseClairvoyant(name string) (d time.Duration, ok bool, err error) {
	n := strings.ToLower(name)
	if !strings.HasPrefix(n, ClairvoyantPrefix) {
		return 0, false, nil
	}
	mid, found := strings.CutSuffix(strings.TrimPrefix(n, ClairvoyantPrefix), "-budget")
	if !found {
		return 0, true, fmt.Errorf("%q: a clairvoyant policy is clairvoyant-<d>-budget (e.g. clairvoyant-15m-budget)", name)
	}
	d, err = time.ParseDuration(mid)
	if err != nil || d < 0 {
		return 0, true, fmt.Errorf("%q: %q is not a non-negative duration", name, mid)
	}
	return d, true, nil
}

// clairvoyant knows the world's demand: Predict writes the mean demand over [τ − d/2, τ + d/2]
// at the sample times τ after now (set by the simulation before each decision).
type clairvoyant struct {
	name string
	w    *World
	d    time.Duration
	cum  []float64 // cum[i] = Σ Inst[:i]·tick
	now  *time.Duration
	step time.Duration
}

func newClairvoyant(name string, w *World, d time.Duration, now *time.Duration) *clairvoyant {
	c := &clairvoyant{name: name, w: w, d: d, now: now, step: w.Period, cum: make([]float64, len(w.Inst)+1)}
	for i, v := range w.Inst {
		c.cum[i+1] = c.cum[i] + v
	}
	return c
}

func (c *clairvoyant) Name() string    { return c.name }
func (c *clairvoyant) MinHistory() int { return 1 }
func (c *clairvoyant) Fit(context.Context, []float64) (forecast.FitReport, error) {
	return forecast.FitReport{}, nil
}
func (c *clairvoyant) Clone() forecast.Forecaster { cp := *c; return &cp }

// meanAt is the mean of the tick demand over [τ − d/2, τ + d/2], clipped to the trace.
func (c *clairvoyant) meanAt(tau time.Duration) float64 {
	n := len(c.w.Inst)
	lo := int((tau - c.d/2) / c.w.Tick)
	hi := int((tau+c.d/2)/c.w.Tick) + 1
	lo, hi = max(0, min(lo, n-1)), max(1, min(hi, n))
	if hi <= lo {
		hi = lo + 1
	}
	return (c.cum[hi] - c.cum[lo]) / float64(hi-lo)
}

func (c *clairvoyant) Predict(_ []float64, dst []float64) error {
	for j := range dst {
		dst[j] = c.meanAt(*c.now + time.Duration(j+1)*c.step)
	}
	return nil
}

// clairvoyantConfig sets cfg up for clairvoyant-<d>-budget on w: the budget policy with the
// clairvoyant forecaster, which reads the simulated time from now.
func clairvoyantConfig(name string, d time.Duration, w *World, now *time.Duration) (policy.Spec, forecast.Forecaster, error) {
	spec, err := policy.Parse("budget", "")
	if err != nil {
		return policy.Spec{}, nil, err
	}
	spec.Name = strings.ToLower(name)
	spec.Model = strings.TrimSuffix(spec.Name, "-budget")
	return spec, newClairvoyant(spec.Model, w, d, now), nil
}
