package forecast

import (
	"context"
	"fmt"
)

// snDefaultSeason is one day of 5-minute samples, the period of most service load.
const snDefaultSeason = 288

func init() {
	Register("seasonal-naive", func(cfg Config) (Forecaster, error) {
		season, err := snSeasonFromConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("seasonal-naive: %w", err)
		}
		return &seasonalNaiveModel{cfg: cfg, season: season}, nil
	})
}

// snSeasonFromConfig returns Config.Season, or the default when it is zero.
func snSeasonFromConfig(cfg Config) (int, error) {
	switch {
	case cfg.Season < 0:
		return 0, fmt.Errorf("season (%d) must not be negative (0 means the default %d)", cfg.Season, snDefaultSeason)
	case cfg.Season == 0:
		return snDefaultSeason, nil
	default:
		return cfg.Season, nil
	}
}

// seasonalNaiveModel forecasts the value observed one season earlier. It captures a daily
// pattern without any fitting, so it is the baseline a seasonal model has to beat; beyond one
// season it repeats the last observed season (y[t+h] = y[t+h−k·season] for the smallest k
// that lands in the history), which is the recursive forecast of the same rule.
type seasonalNaiveModel struct {
	cfg    Config
	season int
}

// Name returns "seasonal-naive".
func (m *seasonalNaiveModel) Name() string { return "seasonal-naive" }

// MinHistory is one season: the model needs a value one season back.
func (m *seasonalNaiveModel) MinHistory() int { return m.season }

// Config returns the model's settings.
func (m *seasonalNaiveModel) Config() Config { return m.cfg }

// Fit only validates history: there is nothing to train.
func (m *seasonalNaiveModel) Fit(ctx context.Context, history []float64) (FitReport, error) {
	return naiveClosedFormFit(ctx, m.Name(), history, m.MinHistory())
}

// Predict writes y[n−season+((h−1) mod season)] into dst[h−1] for h = 1..len(dst), n being
// len(history): the value one season before the target step, taken as many seasons back as
// needed to land in the history.
func (m *seasonalNaiveModel) Predict(history []float64, dst []float64) error {
	if err := naivePredictCheck(m.Name(), history, dst, m.MinHistory()); err != nil {
		return err
	}
	last := history[len(history)-m.season:]
	for i := range dst {
		dst[i] = last[i%m.season]
	}
	return nil
}

// Clone returns a copy; the model holds no state beyond its configuration.
func (m *seasonalNaiveModel) Clone() Forecaster {
	c := *m
	return &c
}
