package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/forecast"
)

// newServer is NewServer, as `debi exporter` calls it; the test fails when it fails.
func newServer(t *testing.T, opts Options, logger *slog.Logger, reg prometheus.Registerer) *Server {
	t.Helper()
	s, err := NewServer(opts, logger, reg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveAndRun serves srv's Handler on l beside srv.Run(ctx), as `debi exporter` does, and
// returns Run's error once the server has stopped too.
func serveAndRun(ctx context.Context, srv *Server, l net.Listener) error {
	hs := &http.Server{Handler: srv.Handler()}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(l)
	}()
	err := srv.Run(ctx)
	_ = hs.Close()
	<-served
	return err
}

// testModel is a parameter-free forecaster (the last value plus the mean step of the last
// driftSpan values, per step ahead), so that training is instant and the exporter, whose
// training runs in the background, and a reference runner training in line predict the same.
const testModel = "exporter-test-drift"

const driftSpan = 5

func init() {
	forecast.Register(testModel, func(forecast.Config) (forecast.Forecaster, error) { return driftModel{}, nil })
}

type driftModel struct{}

func (driftModel) Name() string    { return testModel }
func (driftModel) MinHistory() int { return driftSpan + 1 }
func (driftModel) Fit(context.Context, []float64) (forecast.FitReport, error) {
	return forecast.FitReport{Model: testModel, StopReason: forecast.StopClosedForm}, nil
}
func (driftModel) Clone() forecast.Forecaster { return driftModel{} }
func (driftModel) Predict(h []float64, dst []float64) error {
	if err := forecast.CheckHistory(h, driftSpan+1); err != nil {
		return err
	}
	last := h[len(h)-1]
	slope := (last - h[len(h)-1-driftSpan]) / driftSpan
	for i := range dst {
		dst[i] = last + slope*float64(i+1)
	}
	return nil
}

// series is a fake PromQL result: the value of one expression at a time. ok false means an
// empty result; err an API failure.
type series func(t time.Time) (v float64, ok bool, err error)

// fakeQuerier answers instant queries from series and range queries by evaluating the same
// series at every step, which is what Prometheus guarantees a range query is.
type fakeQuerier struct {
	mu     sync.Mutex
	byExpr map[string]series
	multi  map[string]bool // expressions that return two series
	down   bool            // every query fails, as with Prometheus unreachable
	calls  int
	rangeQ []v1.Range // the ranges of the successful range queries, in order
}

// ranges returns the ranges of the range queries answered so far.
func (f *fakeQuerier) ranges() []v1.Range {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]v1.Range(nil), f.rangeQ...)
}

var errDown = errors.New("connection refused")

func (f *fakeQuerier) lookup(expr string) (series, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return nil, false, errDown
	}
	s, ok := f.byExpr[expr]
	if !ok {
		return nil, false, fmt.Errorf("fake: unknown query %q", expr)
	}
	return s, f.multi[expr], nil
}

func (f *fakeQuerier) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }

func (f *fakeQuerier) Query(_ context.Context, expr string, ts time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	s, multi, err := f.lookup(expr)
	if err != nil {
		return nil, nil, nil, err
	}
	v, ok, err := s(ts)
	if err != nil {
		return nil, nil, nil, err
	}
	vec := model.Vector{}
	if ok {
		vec = append(vec, &model.Sample{Metric: model.Metric{"a": "1"}, Value: model.SampleValue(v), Timestamp: model.TimeFromUnixNano(ts.UnixNano())})
		if multi {
			vec = append(vec, &model.Sample{Metric: model.Metric{"a": "2"}, Value: model.SampleValue(v)})
		}
	}
	return vec, nil, nil, nil
}

func (f *fakeQuerier) QueryRange(_ context.Context, expr string, r v1.Range, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	s, multi, err := f.lookup(expr)
	if err != nil {
		return nil, nil, nil, err
	}
	f.mu.Lock()
	f.rangeQ = append(f.rangeQ, r)
	f.mu.Unlock()
	ss := &model.SampleStream{Metric: model.Metric{"a": "1"}}
	for t := r.Start; !t.After(r.End); t = t.Add(r.Step) {
		v, ok, err := s(t)
		if err != nil {
			return nil, nil, nil, err
		}
		if ok {
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: model.SampleValue(v)})
		}
	}
	m := model.Matrix{}
	if len(ss.Values) > 0 {
		m = append(m, ss)
		if multi {
			m = append(m, &model.SampleStream{Metric: model.Metric{"a": "2"}, Values: ss.Values})
		}
	}
	return m, nil, nil, nil
}

func constant(v float64) series {
	return func(time.Time) (float64, bool, error) { return v, true, nil }
}

// loadConfig parses a test configuration.
func loadConfig(t testing.TB, yml string) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(yml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return c
}

func isNaN(x float64) bool { return math.IsNaN(x) }
