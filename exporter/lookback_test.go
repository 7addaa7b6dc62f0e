package exporter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// TestLookbackDelta: every instant query of a step carries global.lookback_delta, so that after
// a Prometheus outage (a killed Prometheus writes no staleness markers) the samples from before
// it are no data, and the policy is stale, instead of current.
func TestLookbackDelta(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		got[r.Form.Get("query")] = r.Form.Get("lookback_delta")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2"]}]}}`))
	}))
	defer srv.Close()
	c, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ global, want string }{{"", "2m0s"}, {"lookback_delta: 45s", "45s"}} {
		cfg := strings.Replace(budgetCfg, "global: {interval: 15s}", "global: {interval: 15s, "+tc.global+"}", 1)
		e, _ := newTestExporter(t, cfg, v1.NewAPI(c))
		e.Step(context.Background(), time.Unix(1_700_000_000, 0))
		e.Close()
		mu.Lock()
		for _, q := range []string{"demand", "replicas", "ready"} {
			if got[q] != tc.want {
				t.Errorf("%q: query %s sent lookback_delta %q, want %q", tc.global, q, got[q], tc.want)
			}
		}
		mu.Unlock()
	}
}
