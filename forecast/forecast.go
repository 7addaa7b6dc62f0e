// Package forecast holds debi's load models: forecasters that predict demand some steps ahead
// (W2 of the method) and the peaks-over-threshold high-water fit (W3). Numbers in, numbers out:
// nothing here knows about replicas, Prometheus or Kubernetes.
//
// Forecasters register by name in a registry (see Register), so adding a model is one file plus
// one Register call, and every caller — the backtest, the exporter, the accuracy report — offers
// it by name.
package forecast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/internal/registry"
)

// ErrShortHistory is returned (wrapped) when a model is given fewer points than MinHistory.
var ErrShortHistory = errors.New("history too short")

// Forecaster predicts a demand series. Implementations are not safe for concurrent use: the
// caller trains a Clone off the decision path and swaps it in when training ends.
type Forecaster interface {
	// Name is the registry name of the model.
	Name() string
	// MinHistory is the fewest points Fit and Predict accept.
	MinHistory() int
	// Fit trains the model on history (oldest first). Models with parameters start from their
	// current ones (warm start) so that periodic retraining is cheap. Fit stops when ctx is done
	// and reports why it stopped.
	Fit(ctx context.Context, history []float64) (FitReport, error)
	// Predict writes the forecasts for the len(dst) steps after the end of history into dst:
	// dst[0] is one step ahead. Multi-step forecasts are produced recursively. Predict must not
	// retain history or dst.
	Predict(history []float64, dst []float64) error
	// Clone returns an independent copy with the same parameters.
	Clone() Forecaster
}

// FitReport says how a training run went and why it stopped.
type FitReport struct {
	Model          string        `json:"model"`
	Iterations     int           `json:"iterations"`
	Duration       time.Duration `json:"duration_ns"`
	TrainLoss      float64       `json:"train_loss"`
	ValidationLoss float64       `json:"validation_loss"`
	// StopReason is one of the Stop* constants.
	StopReason string `json:"stop_reason"`
}

// Reasons a training run stopped.
const (
	StopClosedForm    = "closed-form"    // no iterative training (naive models)
	StopConverged     = "converged"      // loss below the convergence threshold or optimiser converged
	StopEarlyStopping = "early-stopping" // validation loss stopped improving
	StopTimeBudget    = "time-budget"    // the training time budget ran out
	StopMaxIterations = "max-iterations" // the iteration cap was reached
	StopCanceled      = "canceled"       // the context was canceled
)

// Config carries the settings of every model; each model reads the fields it uses and ignores
// the others. Zero values mean "the model's default".
type Config struct {
	// Season is the seasonal period in steps (seasonal-naive, holtwinters). Default 288
	// (one day of 5-minute samples).
	Season int `yaml:"season,omitempty" json:"season,omitempty"`
	// Window is the input window L of the neural models. Default 30.
	Window int `yaml:"window,omitempty" json:"window,omitempty"`
	// Hidden is the number of hidden units per direction of the neural models. Default 100.
	Hidden int `yaml:"hidden,omitempty" json:"hidden,omitempty"`
	// MaxIterations caps the optimiser's iterations. Default per model.
	MaxIterations int `yaml:"max_iterations,omitempty" json:"max_iterations,omitempty"`
	// TimeBudget caps one training run's wall time. Default per model.
	TimeBudget time.Duration `yaml:"time_budget,omitempty" json:"time_budget,omitempty"`
	// LearningRate of the Adam optimiser. Default per model.
	LearningRate float64 `yaml:"learning_rate,omitempty" json:"learning_rate,omitempty"`
	// BatchSize of the neural models. Default 64.
	BatchSize int `yaml:"batch_size,omitempty" json:"batch_size,omitempty"`
	// Seed makes training reproducible.
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
}

// Factory builds a model from its configuration.
type Factory func(cfg Config) (Forecaster, error)

var plugins = registry.New[Factory]("model")

// Register makes a model available by name (case-insensitive). It panics on an empty or
// duplicate name: both are programming errors found at start-up.
func Register(name string, f Factory) { plugins.Register(name, f) }

// New builds the model registered under name (case-insensitive).
func New(name string, cfg Config) (Forecaster, error) {
	f, err := plugins.Get(name)
	if err != nil {
		return nil, err
	}
	return f(cfg)
}

// Names lists the registered models, sorted.
func Names() []string { return plugins.Names() }

// Known reports whether a model of that name is registered.
func Known(name string) bool { return plugins.Known(name) }

// CheckHistory returns a wrapped ErrShortHistory when history has fewer than min points, and an
// error naming the index of the first NaN or infinite value.
func CheckHistory(history []float64, min int) error {
	if len(history) < min {
		return fmt.Errorf("%w: %d points, need at least %d", ErrShortHistory, len(history), min)
	}
	for i, v := range history {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("history[%d] is %v: models need finite values", i, v)
		}
	}
	return nil
}
