package forecast

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Fallback is a model that forecasts with a second, cheaper model while its first waits for the
// history it needs: Holt-Winters needs two seasons (two days of a daily cycle) before its first
// forecast, ARIMA a few dozen points. Once the primary is fitted, the fallback is no longer used.
//
// It reports the fallback's MinHistory, so a caller forecasts as soon as the fallback can, and
// says through Needs how much history to keep for the primary and through WantsFit when a fit is
// due before the caller's own schedule: when the primary's history has arrived, and while it
// waits, each time the history has doubled since the fallback's last fit (so the fallback is
// refitted at 24, 48, 96, … points, log₂ of the wait in fits).
type Fallback struct {
	primary, fallback Forecaster
	primaryFitted     bool
	fallbackFitLen    int // history length of the fallback's last fit, 0 before it

	// Choose keeps both models once the primary is fitted and forecasts with the one whose
	// one-step errors have the smaller exponential mean (span ChooseSpan steps). Predict then
	// keeps state: it must be called once per new point (as the policy does), and each call's
	// one-step forecasts are scored against the newest point of the next call's history.
	choose  bool
	mean    bool
	span    float64
	lastLen int
	next    [2]float64 // each model's one-step forecast from the last call
	err     [2]float64 // their exponential mean absolute errors
	errN    int
	scratch []float64
}

// SetMean makes Predict forecast the mean of the two models once both can forecast.
func (m *Fallback) SetMean() { m.mean = true }

// SetChoose makes Predict choose between the models by their recent one-step errors once both
// can forecast (span in steps).
func (m *Fallback) SetChoose(span int) {
	m.choose, m.span = span > 0, float64(span)
}

// HistoryKeeper is a model whose history to keep (Needs) exceeds the history it forecasts from
// (MinHistory).
type HistoryKeeper interface {
	Needs() int
}

// FitScheduler is a model that asks for a fit at a history length n sooner than the caller's
// retraining schedule would give it.
type FitScheduler interface {
	WantsFit(n int) bool
}

// NewFallback returns primary backed by fallback. They must differ in what they need: a fallback
// that needs as much history as the primary would never be used.
func NewFallback(primary, fallback Forecaster) (*Fallback, error) {
	if primary == nil || fallback == nil {
		return nil, errors.New("fallback: two models are needed")
	}
	if fallback.MinHistory() >= primary.MinHistory() {
		return nil, fmt.Errorf("fallback: %s needs %d points, no fewer than %s's %d: it would never forecast first",
			fallback.Name(), fallback.MinHistory(), primary.Name(), primary.MinHistory())
	}
	return &Fallback{primary: primary, fallback: fallback}, nil
}

// Name is the primary's name: it is the model the policy runs, once warmed up.
func (m *Fallback) Name() string { return m.primary.Name() }

// MinHistory is the fallback's.
func (m *Fallback) MinHistory() int { return m.fallback.MinHistory() }

// Needs is the primary's MinHistory: the history the caller must keep.
func (m *Fallback) Needs() int { return m.primary.MinHistory() }

// Active names the model Predict uses now.
func (m *Fallback) Active() string {
	if m.primaryFitted {
		return m.primary.Name()
	}
	return m.fallback.Name()
}

// WantsFit says whether a fit is due at history length n before the caller's schedule.
func (m *Fallback) WantsFit(n int) bool {
	if m.primaryFitted {
		return false
	}
	if n >= m.primary.MinHistory() {
		return true
	}
	return n >= m.fallback.MinHistory() && n >= 2*m.fallbackFitLen
}

// Fit fits the primary when history is long enough for it, else the fallback. The report is the
// model's that was fitted.
func (m *Fallback) Fit(ctx context.Context, history []float64) (FitReport, error) {
	if len(history) >= m.primary.MinHistory() {
		rep, err := m.primary.Fit(ctx, history)
		if err == nil {
			m.primaryFitted = true
		}
		if m.choose || m.mean {
			if _, ferr := m.fallback.Fit(ctx, history); ferr == nil {
				m.fallbackFitLen = len(history)
			}
		}
		return rep, err
	}
	rep, err := m.fallback.Fit(ctx, history)
	if err == nil {
		m.fallbackFitLen = len(history)
	}
	return rep, err
}

// Predict forecasts with the primary once it is fitted and history is long enough for it, else
// with the fallback.
func (m *Fallback) Predict(history []float64, dst []float64) error {
	if !(m.primaryFitted && len(history) >= m.primary.MinHistory()) {
		return m.fallback.Predict(history, dst)
	}
	if m.mean {
		if cap(m.scratch) < len(dst) {
			m.scratch = make([]float64, len(dst))
		}
		alt := m.scratch[:len(dst)]
		if err := m.primary.Predict(history, dst); err != nil {
			return err
		}
		if err := m.fallback.Predict(history, alt); err != nil {
			return nil
		}
		for i := range dst {
			dst[i] = (dst[i] + alt[i]) / 2
		}
		return nil
	}
	if !m.choose {
		return m.primary.Predict(history, dst)
	}
	if m.lastLen > 0 {
		y := history[len(history)-1]
		a := 1 / m.span
		if m.errN == 0 {
			a = 1
		}
		for k := range m.next {
			if e := math.Abs(m.next[k] - y); !math.IsNaN(e) {
				m.err[k] += a * (e - m.err[k])
			}
		}
		m.errN++
	}
	m.lastLen = len(history)
	if cap(m.scratch) < len(dst) {
		m.scratch = make([]float64, len(dst))
	}
	alt := m.scratch[:len(dst)]
	if err := m.primary.Predict(history, dst); err != nil {
		return err
	}
	m.next[0] = dst[0]
	if err := m.fallback.Predict(history, alt); err != nil {
		m.next[1] = math.NaN()
		return nil
	}
	m.next[1] = alt[0]
	if m.errN > 0 && m.err[1] < m.err[0] {
		copy(dst, alt)
	}
	return nil
}

// Clone deep-copies both models.
func (m *Fallback) Clone() Forecaster {
	c := *m
	c.primary, c.fallback = m.primary.Clone(), m.fallback.Clone()
	c.scratch = nil
	return &c
}
