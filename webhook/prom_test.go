package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/prometheus/client_golang/api"
)

func promQuery(t testing.TB, url string, timeout time.Duration) QueryFunc {
	t.Helper()
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	return PrometheusQuery(c, timeout, 0)
}

// TestPrometheusQueryErrors: what Prometheus answers badly (nothing, two series, NaN, a
// negative or absurd value, a rejected query) is a data error, on which the webhook holds;
// Prometheus failing is not, and may lead to the fallback.
func TestPrometheusQueryErrors(t *testing.T) {
	prom := testenv.FakePrometheus(t, map[string]float64{"good": 0.75, "neg": -1, "nan": nanValue(), "huge": 1e308})
	q := promQuery(t, prom.URL, time.Second)
	if v, err := q(context.Background(), "good"); err != nil || v != 0.75 {
		t.Errorf("good = %v, %v", v, err)
	}
	for expr, want := range map[string]error{"absent": ErrNoSeries, "neg": ErrUnusable, "nan": ErrUnusable, "huge": ErrUnusable} {
		_, err := q(context.Background(), expr)
		if !errors.Is(err, want) || !isDataError(err) {
			t.Errorf("%s: err = %v, want %v", expr, err, want)
		}
	}
	two := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[` +
			`{"metric":{"instance":"a"},"value":[1,"1"]},{"metric":{"instance":"b"},"value":[1,"2"]}]}}`))
	}))
	defer two.Close()
	if _, err := promQuery(t, two.URL, time.Second)(context.Background(), "x"); !errors.Is(err, ErrSeveralSeries) {
		t.Errorf("two series: err = %v, want ErrSeveralSeries", err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
	}))
	defer bad.Close()
	if _, err := promQuery(t, bad.URL, time.Second)(context.Background(), "x{"); !errors.Is(err, ErrUnusable) {
		t.Errorf("bad_data: err = %v, want ErrUnusable", err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	url := down.URL
	down.Close()
	if _, err := promQuery(t, url, time.Second)(context.Background(), "x"); err == nil || isDataError(err) {
		t.Errorf("Prometheus down: err = %v, want an outage (not a data error)", err)
	}
}

func nanValue() float64 { var z float64; return z / z }
