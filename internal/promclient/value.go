package promclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Querier is the instant query of Prometheus's HTTP API: client_golang's v1.API has it, and so
// do the exporter's batching and checking queriers and the tests' fakes.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error)
}

// Reasons of an AnswerError: why an instant query's answer holds no single value.
var (
	// ErrNoSeries: an empty instant vector, or no value at all (the series is absent, or older
	// than the query's lookback_delta).
	ErrNoSeries = errors.New("no series")
	// ErrSeveralSeries: more than one series where one is expected; which is right cannot be
	// known.
	ErrSeveralSeries = errors.New("several series")
	// ErrNotInstant: a range vector or a string, not an instant vector or a scalar.
	ErrNotInstant = errors.New("not an instant vector or a scalar")
	// ErrNotFinite: the one sample is NaN (0/0, a rate over a counter that reset to nothing) or
	// ±Inf.
	ErrNotFinite = errors.New("not a finite value")
)

// AnswerError is an instant query's answer that Prometheus gave but that holds no single finite
// value. The exporter and the webhook each name these answers their own way (their sentinels and
// messages), from the fields.
type AnswerError struct {
	// Reason is ErrNoSeries, ErrSeveralSeries, ErrNotInstant or ErrNotFinite.
	Reason error
	// Series is the number of series, and First and Second the labels of the first two
	// (ErrSeveralSeries).
	Series        int
	First, Second model.Metric
	// Type is the answer's type (ErrNotInstant).
	Type model.ValueType
	// Value is the sample's value (ErrNotFinite).
	Value float64
}

func (e *AnswerError) Error() string {
	switch e.Reason {
	case ErrSeveralSeries:
		return fmt.Sprintf("%v: %d, first two %s and %s", e.Reason, e.Series, e.First, e.Second)
	case ErrNotInstant:
		return fmt.Sprintf("%v: %s", e.Reason, e.Type)
	case ErrNotFinite:
		return fmt.Sprintf("%v: %v", e.Reason, e.Value)
	}
	return e.Reason.Error()
}

func (e *AnswerError) Unwrap() error { return e.Reason }

// Instant runs the instant query expr at ts and returns the single value of its answer (Value).
// An error of the query itself is returned as client_golang gives it (a *v1.Error when
// Prometheus answered with one: IsBadData). Warnings and infos are dropped: Prometheus still
// answered, and a partial answer that is wrong shows as no series or several.
func Instant(ctx context.Context, q Querier, expr string, ts time.Time, opts ...v1.Option) (float64, error) {
	v, _, _, err := q.Query(ctx, expr, ts, opts...)
	if err != nil {
		return math.NaN(), err
	}
	return Value(v)
}

// Value is the single finite value of an instant query's answer: an instant vector of one
// sample, or a scalar. Any other answer gives NaN and an *AnswerError.
func Value(v model.Value) (float64, error) {
	var x float64
	switch v := v.(type) {
	case model.Vector:
		switch len(v) {
		case 0:
			return math.NaN(), &AnswerError{Reason: ErrNoSeries}
		case 1:
			x = float64(v[0].Value)
		default:
			return math.NaN(), &AnswerError{Reason: ErrSeveralSeries, Series: len(v), First: v[0].Metric, Second: v[1].Metric}
		}
	case *model.Scalar:
		x = float64(v.Value)
	case nil:
		return math.NaN(), &AnswerError{Reason: ErrNoSeries}
	default:
		return math.NaN(), &AnswerError{Reason: ErrNotInstant, Type: v.Type()}
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return math.NaN(), &AnswerError{Reason: ErrNotFinite, Value: x}
	}
	return x, nil
}

// IsBadData reports whether err is Prometheus rejecting the query itself (bad_data: a syntax
// error, an unknown function): a query that will not work by waiting, unlike an outage.
func IsBadData(err error) bool {
	var apiErr *v1.Error
	return errors.As(err, &apiErr) && apiErr.Type == v1.ErrBadData
}
