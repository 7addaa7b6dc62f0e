package forecast

import (
	"context"
	"errors"
	"fmt"
)

// Fallback is a model that forecasts with a second, cheaper model while its first waits for the
// history it needs: Holt-Winters needs two seasons (two days of a daily cycle) before its first
// forecast, ARIMA a few dozen points. Once the primary is fitted the fallback is no longer used,
// so a Fallback forecasts as its primary does from then on.
//
// It reports the fallback's MinHistory, so that a caller forecasts as soon as the fallback can.
// Needs says how much history to keep for the primary, and WantsFit when a fit is due before the
// caller's own schedule: when the primary's history has arrived, and while it waits, each time
// the history has doubled since the fallback's last fit (ARIMA is refitted at 24, 48, 96, …
// points: log₂ of the wait in fits).
type Fallback struct {
	primary, fallback Forecaster
	primaryFitted     bool
	fallbackFitLen    int // history length of the fallback's last fit, 0 before it
}

// HistoryKeeper is a model whose history to keep (Needs) exceeds the history it forecasts from
// (MinHistory).
type HistoryKeeper interface {
	Needs() int
}

// FitScheduler is a model that asks for a fit at history length n sooner than the caller's
// retraining schedule would give it.
type FitScheduler interface {
	WantsFit(n int) bool
}

// NewFallback returns primary backed by fallback. The fallback must need fewer points than the
// primary: one that needs as many would never forecast first.
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

// Name is the primary's name: the model the policy runs once it has its history.
func (m *Fallback) Name() string { return m.primary.Name() }

// MinHistory is the fallback's.
func (m *Fallback) MinHistory() int { return m.fallback.MinHistory() }

// Needs is the primary's MinHistory: the history the caller must keep.
func (m *Fallback) Needs() int { return m.primary.MinHistory() }

// Active names the model Predict forecasts with now.
func (m *Fallback) Active() string {
	if m.primaryFitted {
		return m.primary.Name()
	}
	return m.fallback.Name()
}

// WantsFit says whether a fit is due at history length n before the caller's schedule.
func (m *Fallback) WantsFit(n int) bool {
	switch {
	case m.primaryFitted:
		return false
	case n >= m.primary.MinHistory():
		return true
	default:
		return n >= m.fallback.MinHistory() && n >= 2*m.fallbackFitLen
	}
}

// Fit fits the primary when history is long enough for it, else the fallback. The report is that
// of the model fitted.
func (m *Fallback) Fit(ctx context.Context, history []float64) (FitReport, error) {
	if len(history) >= m.primary.MinHistory() {
		rep, err := m.primary.Fit(ctx, history)
		if err == nil {
			m.primaryFitted = true
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
	if m.primaryFitted && len(history) >= m.primary.MinHistory() {
		return m.primary.Predict(history, dst)
	}
	return m.fallback.Predict(history, dst)
}

// Clone deep-copies both models.
func (m *Fallback) Clone() Forecaster {
	c := *m
	c.primary, c.fallback = m.primary.Clone(), m.fallback.Clone()
	return &c
}
