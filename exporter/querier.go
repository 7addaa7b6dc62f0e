package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/internal/promclient"
)

// Querier is the part of Prometheus's HTTP API the exporter needs: the instant query that
// internal/promclient reads a value from, and the range query of the history. client_golang's
// v1.API satisfies it; tests and benchmarks use fakes.
type Querier interface {
	promclient.Querier
	QueryRange(ctx context.Context, query string, r v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error)
}

// Errors of one query, so that the loop can tell "no data" (keep the last values, mark stale)
// from "ambiguous data" (a configuration problem) from "Prometheus failed".
var (
	// ErrEmpty means the query returned no series, or a NaN or infinite value.
	ErrEmpty = errors.New("query returned no usable value")
	// ErrSeveralSeries means the query returned more than one series where one is expected:
	// aggregate it (sum, max) or narrow its selector.
	ErrSeveralSeries = errors.New("query returned several series; expected one")
)

// isConfigError reports whether a query's error is the configuration's fault rather than the
// data's or Prometheus's: several series where one is expected, or a query Prometheus rejects
// as bad data. Such a query will not work by waiting: its policy is marked failed.
func isConfigError(err error) bool {
	return errors.Is(err, ErrSeveralSeries) || promclient.IsBadData(err)
}

// instantValue runs an instant query at ts and returns its single value. An empty result, NaN
// or ±Inf wrap ErrEmpty; several series wrap ErrSeveralSeries.
func instantValue(ctx context.Context, q Querier, expr string, ts time.Time, opts ...v1.Option) (float64, error) {
	x, err := promclient.Instant(ctx, q, expr, ts, opts...)
	return x, answerError(err)
}

// resultValue is the single value of an instant query's result (see instantValue).
func resultValue(v model.Value) (float64, error) {
	x, err := promclient.Value(v)
	return x, answerError(err)
}

// answerError is err in the exporter's terms: an answer without a single value is ErrEmpty or
// ErrSeveralSeries (or names the answer's type); any other error is returned as it is.
func answerError(err error) error {
	var a *promclient.AnswerError
	if !errors.As(err, &a) {
		return err
	}
	switch a.Reason {
	case promclient.ErrNoSeries:
		return ErrEmpty
	case promclient.ErrSeveralSeries:
		return fmt.Errorf("%w: %d series, first two %s and %s", ErrSeveralSeries, a.Series, a.First, a.Second)
	case promclient.ErrNotFinite:
		return fmt.Errorf("%w: value is %v", ErrEmpty, a.Value)
	}
	return fmt.Errorf("query returned a %s, want an instant vector or a scalar", a.Type)
}

// rangeValues runs a range query and returns its single series as a map from the step's Unix
// millisecond time to the value; NaN and ±Inf points are left out. No series gives an empty map.
func rangeValues(ctx context.Context, q Querier, expr string, r v1.Range) (map[int64]float64, error) {
	v, _, _, err := q.QueryRange(ctx, expr, r)
	if err != nil {
		return nil, err
	}
	out := map[int64]float64{}
	switch v := v.(type) {
	case model.Matrix:
		switch len(v) {
		case 0:
			return out, nil
		case 1:
		default:
			return nil, fmt.Errorf("%w: %d series, first two %s and %s", ErrSeveralSeries, len(v), v[0].Metric, v[1].Metric)
		}
		for _, p := range v[0].Values {
			if x := float64(p.Value); !math.IsNaN(x) && !math.IsInf(x, 0) {
				out[int64(p.Timestamp)] = x
			}
		}
		return out, nil
	case nil:
		return out, nil
	default:
		return nil, fmt.Errorf("range query returned a %s, want a matrix", v.Type())
	}
}

// checkingQuerier passes every query through and, when the context carries a queryCheck (the
// step of one policy), records in it the instant queries whose results are configuration
// errors (isConfigError). The loop's step code reads the inputs as it always did; the check
// tells the exporter afterwards that the policy must be marked failed.
type checkingQuerier struct{ Querier }

// queryCheckKey is the context key of a policy step's queryCheck.
type queryCheckKey struct{}

// queryCheck collects the configuration errors of one policy's step.
type queryCheck struct {
	ps   *policyState
	mu   sync.Mutex
	errs []error
}

func withQueryCheck(ctx context.Context, c *queryCheck) context.Context {
	return context.WithValue(ctx, queryCheckKey{}, c)
}

// err is every configuration error of the step, each naming its field path (nil: none).
func (c *queryCheck) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

func (q checkingQuerier) Query(ctx context.Context, expr string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	v, warns, infos, err := q.Querier.Query(ctx, expr, ts, opts...)
	if c, ok := ctx.Value(queryCheckKey{}).(*queryCheck); ok {
		verr := err
		if verr == nil {
			_, verr = resultValue(v)
		}
		if isConfigError(verr) {
			ep := endpointOf(ctx)
			for k, e := range c.ps.queries() {
				if e == expr && c.ps.endpoint(k) == ep {
					c.mu.Lock()
					c.errs = append(c.errs, c.ps.queryError(k, verr))
					c.mu.Unlock()
					break
				}
			}
		}
	}
	return v, warns, infos, err
}
