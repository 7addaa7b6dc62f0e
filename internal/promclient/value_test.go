package promclient

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// answers is a fake Prometheus whose answer to an instant query is the body kept under the
// query's text, with a warning for "warning" (an HTTP 400 bad_data for "bad", 503 for "down");
// it records each request's lookback_delta.
func answers(t *testing.T, lookback *string) Querier {
	t.Helper()
	bodies := map[string]string{
		"one":     `{"resultType":"vector","result":[{"metric":{"job":"a"},"value":[1,"0.75"]}]}`,
		"scalar":  `{"resultType":"scalar","result":[1,"3"]}`,
		"empty":   `{"resultType":"vector","result":[]}`,
		"two":     `{"resultType":"vector","result":[{"metric":{"job":"a"},"value":[1,"1"]},{"metric":{"job":"b"},"value":[1,"2"]}]}`,
		"nan":     `{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}`,
		"inf":     `{"resultType":"scalar","result":[1,"-Inf"]}`,
		"matrix":  `{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}`,
		"warning": `{"resultType":"vector","result":[{"metric":{},"value":[1,"2"]}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		*lookback = r.Form.Get("lookback_delta")
		w.Header().Set("Content-Type", "application/json")
		switch q := r.Form.Get("query"); q {
		case "bad":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
		case "down":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			warnings := ""
			if q == "warning" {
				warnings = `,"warnings":["partial"]`
			}
			_, _ = w.Write([]byte(`{"status":"success","data":` + bodies[q] + warnings + `}`))
		}
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(c)
}

// TestInstant: the single value of each kind of answer, and the reason of each that has none.
func TestInstant(t *testing.T) {
	var lookback string
	q := answers(t, &lookback)
	for _, tc := range []struct {
		expr   string
		want   float64
		reason error // nil: a value
		msg    string
	}{
		{expr: "one", want: 0.75},
		{expr: "scalar", want: 3},
		{expr: "warning", want: 2}, // warnings do not reject an answer
		{expr: "empty", reason: ErrNoSeries, msg: "no series"},
		{expr: "two", reason: ErrSeveralSeries, msg: `several series: 2, first two {job="a"} and {job="b"}`},
		{expr: "nan", reason: ErrNotFinite, msg: "not a finite value: NaN"},
		{expr: "inf", reason: ErrNotFinite, msg: "not a finite value: -Inf"},
		{expr: "matrix", reason: ErrNotInstant, msg: "not an instant vector or a scalar: matrix"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			x, err := Instant(context.Background(), q, tc.expr, time.Unix(1, 0))
			if tc.reason == nil {
				if err != nil || x != tc.want {
					t.Fatalf("Instant = %v, %v; want %v", x, err, tc.want)
				}
				return
			}
			var a *AnswerError
			if !errors.As(err, &a) || !errors.Is(err, tc.reason) || err.Error() != tc.msg || !math.IsNaN(x) {
				t.Fatalf("Instant = %v, %v; want NaN and an *AnswerError %q", x, err, tc.msg)
			}
			if IsBadData(err) {
				t.Errorf("an answer is not bad data: %v", err)
			}
		})
	}
}

// TestInstantFailures: Prometheus rejecting the query is bad data; Prometheus failing is not;
// neither is an *AnswerError.
func TestInstantFailures(t *testing.T) {
	var lookback string
	q := answers(t, &lookback)
	for expr, bad := range map[string]bool{"bad": true, "down": false} {
		_, err := Instant(context.Background(), q, expr, time.Unix(1, 0))
		var a *AnswerError
		if err == nil || errors.As(err, &a) || IsBadData(err) != bad {
			t.Errorf("%s: err %v, IsBadData %v; want an error, IsBadData %v", expr, err, IsBadData(err), bad)
		}
	}
	if IsBadData(nil) || IsBadData(errors.New("x")) {
		t.Error("IsBadData of nil or a plain error")
	}
}

// TestInstantOptions: the options reach Prometheus (lookback_delta).
func TestInstantOptions(t *testing.T) {
	var lookback string
	q := answers(t, &lookback)
	if _, err := Instant(context.Background(), q, "one", time.Unix(1, 0), v1.WithLookbackDelta(90*time.Second)); err != nil || lookback != "1m30s" {
		t.Errorf("lookback_delta %q, err %v; want 1m30s", lookback, err)
	}
	if _, err := Instant(context.Background(), q, "one", time.Unix(1, 0)); err != nil || lookback != "" {
		t.Errorf("lookback_delta %q without the option, err %v", lookback, err)
	}
}

// TestValueNil: no value at all (a fake's answer) is no series.
func TestValueNil(t *testing.T) {
	if x, err := Value(nil); !errors.Is(err, ErrNoSeries) || !math.IsNaN(x) {
		t.Errorf("Value(nil) = %v, %v", x, err)
	}
	if x, err := Value(model.Vector{{Value: 5}}); err != nil || x != 5 {
		t.Errorf("Value(one sample) = %v, %v", x, err)
	}
}
