package forecast

import (
	"fmt"
	"time"

	"github.com/debi-scaler/debi/internal/schema"
)

// This file declares the settings of the calibrator, the POT fit and the models once each, as
// scaling.Params' table declares the scaling parameters (schema.Param): key, ElasticScaler
// field, backtest flag, unit, doc and bounds. CalibratorConfig.Validate is its table's loop;
// POTConfig.Validate keeps its own messages (each says why its bound holds), and config's
// TestSchema holds them to the rows' bounds.

// CalibratorParam is one setting of CalibratorConfig (policies[].budget.<Key>).
type CalibratorParam = schema.Param[CalibratorConfig]

// POTParam is one setting of POTConfig (policies[].evt.<Key>).
type POTParam = schema.Param[POTConfig]

// ModelParam is one setting of Config (policies[].forecast.<Key>).
type ModelParam = schema.Param[Config]

func inOpen(lo, hi float64) func(float64) bool {
	return func(v float64) bool { return schema.Finite(v) && v > lo && v < hi }
}

func inClosed(lo, hi float64) func(float64) bool {
	return func(v float64) bool { return schema.Finite(v) && v >= lo && v <= hi }
}

func atLeast(lo float64) func(float64) bool {
	return func(v float64) bool { return schema.Finite(v) && v >= lo }
}

// Table is every setting of CalibratorConfig, in the order of Validate's errors.
func (CalibratorConfig) Table() []CalibratorParam { return calibratorTable }

var calibratorTable = []CalibratorParam{
	{Key: "overload_budget", Spec: "budget.overloadBudget", Flag: "budget.overload-budget", Unit: "fraction", Doc: "The share of time the workload may run above u_sla.",
		Float: func(c *CalibratorConfig) *float64 { return &c.Budget }, OK: inOpen(0, 0.5), Want: "must be in (0, 0.5)"},
	{Key: "calibration_gain", Flag: "budget.calibration-gain", Unit: "fraction", Doc: "γ of the online calibration α ← α + γ·(budget − overloaded), per tick (0: fixed α).",
		Float: func(c *CalibratorConfig) *float64 { return &c.Gain }, OK: inClosed(0, 1), Want: "must be in [0, 1]"},
	{Key: "error_window", Flag: "budget.error-window", Unit: "errors", Doc: "Forecast errors kept (one per tick under --budget.scoring tick, per sample otherwise; under the priced rule, of each class of forecast: before the next history point or across it).",
		Int: func(c *CalibratorConfig) *int { return &c.Window }, OK: inClosed(10, maxWindow), Want: "must be in [10, 32768]"},
	{Key: "tail_fraction", Unit: "fraction", Doc: "τ of the POT fit on the errors (quantile_method pot).",
		Float: func(c *CalibratorConfig) *float64 { return &c.Tau }, OK: inOpen(0, 1), Want: "must be in (0, 1)"},
	{Key: "quantile_method", Flag: "budget.quantile", Doc: "Quantile of the forecast errors: pot (GPD tail) or empirical.",
		Str: func(c *CalibratorConfig) *string { return &c.Method }, Enum: []string{QuantilePOT, QuantileEmpirical}},
	{Key: "errors", Flag: "budget.errors", Doc: "Forecast errors as ratio (ln actual/forecast), additive (cores), scaled (cores over the mean level) or local (cores over the mean absolute error of the last 240).",
		Str: func(c *CalibratorConfig) *string { return &c.Errors }, Enum: []string{ErrorsRatio, ErrorsAdditive, ErrorsScaled, ErrorsLocal, ErrorsMin}},
	{Key: "quantile_neighbours", Flag: "budget.quantile-neighbours", Unit: "fraction", Doc: "Condition the empirical quantile on the level: read it from this share of the kept errors whose forecasts were nearest the forecast (0: every kept error; 0 by default with --budget.quantile pot).",
		Float: func(c *CalibratorConfig) *float64 { return &c.Neighbours }, OK: inClosed(0, 1), Want: "must be in [0, 1]",
		Cross: func(c CalibratorConfig, _ map[string]bool) error {
			if c.Neighbours > 0 && c.Method == QuantilePOT {
				return fmt.Errorf("quantile_neighbours must be 0 with quantile_method %q (the tail is fitted on one pool), got %v", QuantilePOT, c.Neighbours)
			}
			return nil
		}},
	{Key: "scoring", Flag: "budget.scoring", Doc: "Score forecasts at every tick (the demand at t + lead time, anchored at the observation) or once per sample.",
		Str: func(c *CalibratorConfig) *string { return &c.Scoring }, Enum: []string{ScoringTick, ScoringSample}},
	{Key: "min_errors", Unit: "errors", Doc: "The fewest errors before the margin comes from them; until then it is cold_margin.",
		Int: func(c *CalibratorConfig) *int { return &c.MinErrors }, OK: atLeast(2), Want: "must be in [2, error_window]",
		Cross: func(c CalibratorConfig, valid map[string]bool) error {
			if valid["error_window"] && c.MinErrors > c.Window {
				return fmt.Errorf("min_errors must be in [2, error_window], got %d", c.MinErrors)
			}
			return nil
		}},
	{Key: "cold_margin", Unit: "factor", Doc: "The margin before min_errors errors are kept.",
		Float: func(c *CalibratorConfig) *float64 { return &c.ColdMargin }, OK: atLeast(1), Want: "must be at least 1"},
}

// Table is every setting of POTConfig, in the order of its fields.
func (POTConfig) Table() []POTParam { return potTable }

var potTable = []POTParam{
	{Key: "tau", Spec: "evt.tau", Flag: "evt.tau", Unit: "fraction", Doc: "τ: tail fraction of the EVT threshold.",
		Float: func(c *POTConfig) *float64 { return &c.Tau }, OK: inOpen(0, 1), Want: "must be in (0, 1)"},
	{Key: "q", Spec: "evt.q", Flag: "evt.q", Unit: "probability", Doc: "q: risk of the high-water level (must be below τ).",
		Float: func(c *POTConfig) *float64 { return &c.Q }, OK: inOpen(0, 1), Want: "must be in (0, 1)"},
	{Key: "min_excesses", Spec: "evt.minExcesses", Flag: "evt.min-excesses", Unit: "excesses", Doc: "Fewest excesses for a GPD fit.",
		Int: func(c *POTConfig) *int { return &c.MinExcesses }, OK: atLeast(1), Want: "must be at least 1"},
	{Key: "method", Spec: "evt.method", Flag: "evt.method", Doc: "GPD fit: moments or grimshaw.",
		Str: func(c *POTConfig) *string { return &c.Method }, Enum: []string{potMethodMoments, potMethodGrimshaw}},
}

// Table is every setting of Config, in the order of its fields. Zero is each model's default.
func (Config) Table() []ModelParam { return modelTable }

var modelTable = []ModelParam{
	{Key: "season", Flag: "model.season", Unit: "steps", Doc: "Seasonal period in samples (0: --season converted).",
		Int: func(c *Config) *int { return &c.Season }, OK: atLeast(0), Want: "must not be negative"},
	{Key: "window", Flag: "model.window", Unit: "steps", Doc: "Input window L of the neural models (0: default).",
		Int: func(c *Config) *int { return &c.Window }},
	{Key: "hidden", Flag: "model.hidden", Unit: "units", Doc: "Hidden units per direction (0: default).",
		Int: func(c *Config) *int { return &c.Hidden }},
	{Key: "max_iterations", Flag: "model.max-iterations", Unit: "iterations", Doc: "Training iteration cap (0: default).",
		Int: func(c *Config) *int { return &c.MaxIterations }},
	{Key: "time_budget", Flag: "model.time-budget", Unit: "duration", Doc: "Training time budget per run (0: default).",
		Dur: func(c *Config) *time.Duration { return &c.TimeBudget }},
	{Key: "learning_rate", Doc: "Learning rate of the Adam optimiser (0: the model's default).",
		Float: func(c *Config) *float64 { return &c.LearningRate }},
	{Key: "batch_size", Unit: "samples", Doc: "Batch size of the neural models (0: default).",
		Int: func(c *Config) *int { return &c.BatchSize }},
	{Key: "seed", Flag: "model.seed", Doc: "Training seed.",
		Int64: func(c *Config) *int64 { return &c.Seed }},
}
