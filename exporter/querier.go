package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Querier is the part of Prometheus's HTTP API the exporter needs. client_golang's v1.API
// satisfies it; tests and benchmarks use fakes.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error)
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

// instantValue runs an instant query at ts and returns its single value. An empty result, NaN
// or ±Inf wrap ErrEmpty; several series wrap ErrSeveralSeries.
func instantValue(ctx context.Context, q Querier, expr string, ts time.Time) (float64, error) {
	v, _, _, err := q.Query(ctx, expr, ts)
	if err != nil {
		return math.NaN(), err
	}
	var x float64
	switch v := v.(type) {
	case model.Vector:
		switch len(v) {
		case 0:
			return math.NaN(), ErrEmpty
		case 1:
			x = float64(v[0].Value)
		default:
			return math.NaN(), fmt.Errorf("%w: %d series, first two %s and %s", ErrSeveralSeries, len(v), v[0].Metric, v[1].Metric)
		}
	case *model.Scalar:
		x = float64(v.Value)
	case nil:
		return math.NaN(), ErrEmpty
	default:
		return math.NaN(), fmt.Errorf("query returned a %s, want an instant vector or a scalar", v.Type())
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return math.NaN(), fmt.Errorf("%w: value is %v", ErrEmpty, x)
	}
	return x, nil
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
