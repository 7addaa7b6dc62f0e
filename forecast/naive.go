package forecast

import (
	"context"
	"errors"
	"fmt"
	"time"
)

func init() {
	Register("naive", func(cfg Config) (Forecaster, error) { return &naiveModel{cfg: cfg}, nil })
}

// naiveModel forecasts the last observed value for every horizon. It is the yardstick every other
// model must beat, and the safe choice when nothing is known about the load: a forecast that
// equals the present makes the predictive policy behave like the reactive one.
type naiveModel struct {
	cfg Config
}

// Name returns "naive".
func (m *naiveModel) Name() string { return "naive" }

// MinHistory is 1: the last value is all the model needs.
func (m *naiveModel) MinHistory() int { return 1 }

// Config returns the model's settings.
func (m *naiveModel) Config() Config { return m.cfg }

// Fit only validates history: there is nothing to train.
func (m *naiveModel) Fit(ctx context.Context, history []float64) (FitReport, error) {
	return naiveClosedFormFit(ctx, m.Name(), history, m.MinHistory())
}

// Predict writes the last value of history into every element of dst.
func (m *naiveModel) Predict(history []float64, dst []float64) error {
	if err := naivePredictCheck(m.Name(), history, dst, m.MinHistory()); err != nil {
		return err
	}
	last := history[len(history)-1]
	for i := range dst {
		dst[i] = last
	}
	return nil
}

// Clone returns a copy; the model holds no state beyond its configuration.
func (m *naiveModel) Clone() Forecaster {
	c := *m
	return &c
}

// naiveClosedFormFit is the Fit of the models without parameters: it validates history, so that a
// bad series is reported at training time as it would be for any other model, and reports
// StopClosedForm.
func naiveClosedFormFit(ctx context.Context, name string, history []float64, minHistory int) (FitReport, error) {
	start := time.Now()
	rep := FitReport{Model: name, StopReason: StopClosedForm}
	if err := ctx.Err(); err != nil {
		rep.StopReason = StopCanceled
		return rep, fmt.Errorf("%s: fit canceled: %w", name, err)
	}
	if err := CheckHistory(history, minHistory); err != nil {
		return rep, fmt.Errorf("%s: fit: %w", name, err)
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// naivePredictCheck holds the checks every Predict of this file's family starts with.
func naivePredictCheck(name string, history, dst []float64, minHistory int) error {
	if len(dst) == 0 {
		return errors.New(name + ": predict: empty dst, nothing to forecast")
	}
	if err := CheckHistory(history, minHistory); err != nil {
		return fmt.Errorf("%s: predict: %w", name, err)
	}
	return nil
}
