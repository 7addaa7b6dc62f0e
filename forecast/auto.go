package forecast

import (
	"context"
	"errors"
	"fmt"
	"math"
)

func init() {
	Register("auto", func(cfg Config) (Forecaster, error) {
		var ms []Forecaster
		for _, name := range autoModels {
			m, err := New(name, cfg)
			if err != nil {
				return nil, fmt.Errorf("auto: %w", err)
			}
			ms = append(ms, m)
		}
		return NewAuto(cfg, ms...)
	})
}

// autoModels are the models auto chooses among, in the order that breaks ties: Holt-Winters for
// a daily cycle, ARIMA for a level and a trend without one, the last value for noise that
// neither beats.
var autoModels = []string{"holtwinters", "arima", "naive"}

// autoMinScored is the fewest scored points before a model's error is compared with the others'.
const autoMinScored = 12

// Auto forecasts with whichever of its models has forecast the recent history best: each model
// predicts at every call, its forecasts are kept, and as the history that they forecast arrives
// each is scored — the absolute error at every horizon up to the forecast's length, an
// exponential mean over a season of points — and the forecast of the one with the smallest
// error is returned. It is online model selection by recent error, as the priced rule chooses
// the shape of its path: no model is best on every workload (Holt-Winters on a daily cycle,
// ARIMA or the last value on a level that wanders), and which one a workload needs is read from
// its own history. A model that waits for its history (Holt-Winters: two seasons) takes part
// once it has it, so Auto also forecasts as its cheapest model can, like Fallback.
type Auto struct {
	cfg    Config
	models []Forecaster
	fitted []bool
	span   float64
	// The models' state: the mean absolute error and the points scored, and a ring of the
	// forecasts of the last l calls (path(m, slot)[h], l long), made at history position at[slot].
	err    []float64
	scored []int
	l      int
	paths  []float64 // paths[(m·l + slot)·l + h], in one array
	at     []int64
	ok     []bool // ok[m·l + slot]: model m forecast at that call
	// pos is the history position of the last call's last point (its count since the first
	// call), and tail that call's last points, to find the new ones in the next history.
	pos    int64
	tail   []float64
	chosen int
}

// autoTail is how many last points identify where a history continues the previous one.
const autoTail = 4

// NewAuto returns an Auto over models (at least one), its errors averaged over cfg.Season
// points (288 by default).
func NewAuto(cfg Config, models ...Forecaster) (*Auto, error) {
	if len(models) == 0 {
		return nil, errors.New("auto: no model to choose from")
	}
	span := cfg.Season
	if span <= 0 {
		span = 288
	}
	n := len(models)
	a := &Auto{cfg: cfg, models: models, fitted: make([]bool, n), span: float64(span), err: make([]float64, n),
		scored: make([]int, n), pos: -1, chosen: -1}
	return a, nil
}

// Name is "auto".
func (a *Auto) Name() string { return "auto" }

// Config returns the settings its models were built with.
func (a *Auto) Config() Config { return a.cfg }

// MinHistory is the smallest of its models'.
func (a *Auto) MinHistory() int {
	n := math.MaxInt
	for _, m := range a.models {
		n = min(n, m.MinHistory())
	}
	return n
}

// Needs is the largest of its models' MinHistory: the history the caller must keep.
func (a *Auto) Needs() int {
	n := 0
	for _, m := range a.models {
		n = max(n, m.MinHistory())
		if k, ok := m.(HistoryKeeper); ok {
			n = max(n, k.Needs())
		}
	}
	return n
}

// WantsFit is true when a model not yet fitted has the history it needs.
func (a *Auto) WantsFit(n int) bool {
	for i, m := range a.models {
		if !a.fitted[i] && n >= m.MinHistory() {
			return true
		}
	}
	return false
}

// Active names the model the last forecast came from ("" before the first).
func (a *Auto) Active() string {
	if a.chosen < 0 {
		return ""
	}
	return a.models[a.chosen].Name()
}

// Fit fits every model that has the history it needs; the report is the last one's, its
// duration the sum. It fails only when no model could be fitted.
func (a *Auto) Fit(ctx context.Context, history []float64) (FitReport, error) {
	var rep FitReport
	var total FitReport
	var errs []error
	for i, m := range a.models {
		if len(history) < m.MinHistory() {
			continue
		}
		r, err := m.Fit(ctx, history)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), err))
			continue
		}
		a.fitted[i] = true
		total.Duration += r.Duration
		total.Iterations += r.Iterations
		rep = r
	}
	if rep.Model == "" && len(errs) > 0 {
		return FitReport{}, errors.Join(errs...)
	}
	rep.Duration, rep.Iterations = total.Duration, total.Iterations
	return rep, nil
}

// Predict scores the models' earlier forecasts on the points of history new since the last call,
// has every fitted model forecast, and writes the forecast of the one with the smallest recent
// error into dst.
func (a *Auto) Predict(history []float64, dst []float64) error {
	if err := CheckHistory(history, a.MinHistory()); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	a.score(history)
	slot := int(a.pos % int64(len(dst)))
	var last error
	best := -1
	if a.l != len(dst) {
		a.l = len(dst)
		a.paths, a.ok = make([]float64, len(a.models)*a.l*a.l), make([]bool, len(a.models)*a.l)
		a.at = make([]int64, a.l)
	}
	for i, m := range a.models {
		a.ok[i*a.l+slot] = false
		if !a.fitted[i] || len(history) < m.MinHistory() {
			continue
		}
		if err := m.Predict(history, a.path(i, slot)); err != nil {
			last = err
			continue
		}
		a.ok[i*a.l+slot] = true
		if best < 0 || a.better(i, best) {
			best = i
		}
	}
	a.at[slot] = a.pos
	if best < 0 {
		if last == nil {
			last = errors.New("auto: no model fitted")
		}
		return last
	}
	a.chosen = best
	copy(dst, a.path(best, slot))
	return nil
}

// path is model i's forecast kept in the slot.
func (a *Auto) path(i, slot int) []float64 {
	o := (i*a.l + slot) * a.l
	return a.paths[o : o+a.l : o+a.l]
}

// better is whether model i, after j in the order, is read instead of j: i must have been
// scored enough, and then beats a j that has not been, or one with a larger recent error.
func (a *Auto) better(i, j int) bool {
	switch {
	case a.scored[i] < autoMinScored:
		return false
	case a.scored[j] < autoMinScored:
		return true
	}
	return a.err[i] < a.err[j]
}

// score finds where history continues the last call's (the new points at its end), advances the
// position and scores every kept forecast of each new point.
func (a *Auto) score(history []float64) {
	n := len(history)
	shift := -1
	switch {
	case a.pos < 0:
		shift = 1
	default:
		// One new point is the common case (a caller forecasts once per history step), more come
		// after a gap or to a clone trained in the background, none when the same history comes
		// twice. They are tried in that order, so that a flat stretch, where every shift matches,
		// still counts one point a call.
		most := max(len(a.at), 1)
		for s := 1; s <= most+1 && shift < 0; s++ {
			if k := s % (most + 1); a.continues(history, k) { // 1 … most, then 0
				shift = k
			}
		}
	}
	if shift < 0 { // a history that does not continue the last: forget the forecasts kept
		clear(a.ok)
		shift = 1
	}
	for k := shift; k >= 1; k-- {
		a.pos++
		if a.pos == 0 {
			continue
		}
		y := history[n-k]
		for slot, at := range a.at {
			h := int(a.pos - at)
			if h < 1 || h > len(a.at) {
				continue
			}
			for i := range a.models {
				if !a.ok[i*a.l+slot] {
					continue
				}
				a.add(i, math.Abs(y-a.path(i, slot)[h-1]))
			}
		}
	}
	a.tail = append(a.tail[:0], history[max(n-autoTail, 0):]...)
}

// continues is whether history, less its last s points, ends as the last call's did.
func (a *Auto) continues(history []float64, s int) bool {
	n := len(history) - s
	if n < len(a.tail) || len(a.tail) == 0 {
		return false
	}
	for i, v := range a.tail {
		if history[n-len(a.tail)+i] != v {
			return false
		}
	}
	return true
}

// add folds the error e of model i into its exponential mean over the span.
func (a *Auto) add(i int, e float64) {
	if math.IsNaN(e) {
		return
	}
	a.scored[i]++
	w := 1 / math.Min(float64(a.scored[i]), a.span)
	a.err[i] += w * (e - a.err[i])
}

// Clone deep-copies the models and the scores.
func (a *Auto) Clone() Forecaster {
	c := *a
	c.models = make([]Forecaster, len(a.models))
	for i, m := range a.models {
		c.models[i] = m.Clone()
	}
	c.fitted = append([]bool(nil), a.fitted...)
	c.err = append([]float64(nil), a.err...)
	c.scored = append([]int(nil), a.scored...)
	c.at = append([]int64(nil), a.at...)
	c.tail = append([]float64(nil), a.tail...)
	c.paths, c.ok = append([]float64(nil), a.paths...), append([]bool(nil), a.ok...)
	return &c
}
