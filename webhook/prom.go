package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/internal/promclient"
)

// QueryFunc runs an instant PromQL query that must return exactly one finite, non-negative
// sample. Its errors tell the two failures apart: a query Prometheus answered with something
// unusable (ErrNoSeries, ErrSeveralSeries, ErrUnusable: the data is wrong, the webhook holds),
// and anything else (Prometheus unreachable or failing: the webhook may use the fallback, or asks
// the sender to retry).
type QueryFunc func(ctx context.Context, expr string) (float64, error)

// Answers of Prometheus that cannot be decided on.
var (
	// ErrNoSeries: the query returned nothing (the series is absent or stale).
	ErrNoSeries = errors.New("no series")
	// ErrSeveralSeries: the query returned more than one series (two exporters publish the
	// policy, or a template matches too much): which one is right cannot be known.
	ErrSeveralSeries = errors.New("several series")
	// ErrUnusable: NaN, ±Inf, negative or beyond maxQueryValue.
	ErrUnusable = errors.New("unusable value")
)

// maxQueryValue bounds every figure read: a load of a million times the requests, or a million
// replicas, is a broken query, not a workload.
const maxQueryValue = 1e6

// isDataError reports whether err is Prometheus answering with unusable data (rather than
// Prometheus failing).
func isDataError(err error) bool {
	return errors.Is(err, ErrNoSeries) || errors.Is(err, ErrSeveralSeries) || errors.Is(err, ErrUnusable)
}

// PrometheusQuery returns a QueryFunc over Prometheus's HTTP API through client (built by
// internal/promclient from global.prometheus_url and global.http_config). lookback, when
// positive, is the queries' lookback_delta (global.lookback_delta): a sample older than that is
// no series.
func PrometheusQuery(client api.Client, timeout, lookback time.Duration) QueryFunc {
	papi := promv1.NewAPI(client)
	var opts []promv1.Option
	if lookback > 0 {
		opts = append(opts, promv1.WithLookbackDelta(lookback))
	}
	return func(ctx context.Context, expr string) (float64, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		x, err := promclient.Instant(ctx, papi, expr, time.Now(), opts...)
		return usable(expr, x, err)
	}
}

// sampleValue is the single usable value of an instant query's answer.
func sampleValue(expr string, v model.Value) (float64, error) {
	x, err := promclient.Value(v)
	return usable(expr, x, err)
}

// usable is x, the value read by expr, when the webhook can decide on it; else err in the
// webhook's terms: an answer without a single value, or a query Prometheus rejects, is
// ErrNoSeries, ErrSeveralSeries or ErrUnusable; anything else is Prometheus failing.
func usable(expr string, x float64, err error) (float64, error) {
	var a *promclient.AnswerError
	switch {
	case errors.As(err, &a):
		switch a.Reason {
		case promclient.ErrNoSeries:
			return 0, fmt.Errorf("query %s: %w", expr, ErrNoSeries)
		case promclient.ErrSeveralSeries:
			return 0, fmt.Errorf("query %s: %w: %d, first two %s and %s", expr, ErrSeveralSeries, a.Series, a.First, a.Second)
		case promclient.ErrNotFinite:
			return 0, fmt.Errorf("query %s: %w: %v", expr, ErrUnusable, a.Value)
		}
		return 0, fmt.Errorf("query %s: %w: want an instant vector, got %s", expr, ErrUnusable, a.Type)
	case promclient.IsBadData(err):
		// A query Prometheus rejects is wrong data, not an outage.
		return 0, fmt.Errorf("query %s: %w: %v", expr, ErrUnusable, err)
	case err != nil:
		return 0, fmt.Errorf("query %s: %w", expr, err)
	}
	if x < 0 || x > maxQueryValue {
		return 0, fmt.Errorf("query %s: %w: %v", expr, ErrUnusable, x)
	}
	return x, nil
}
