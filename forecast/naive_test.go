package forecast

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestNaivePredict(t *testing.T) {
	m, err := New("naive", Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		history []float64
		h       int
		want    []float64
	}{
		// The last value, 5, at every horizon.
		{"several", []float64{3, 1, 4, 1, 5}, 3, []float64{5, 5, 5}},
		// MinHistory is 1: a single point is a forecast.
		{"single point", []float64{2.5}, 2, []float64{2.5, 2.5}},
		{"negative", []float64{1, -4}, 1, []float64{-4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := m.Fit(context.Background(), tc.history)
			if err != nil || rep.StopReason != StopClosedForm || rep.Model != "naive" {
				t.Fatalf("Fit = %+v, %v", rep, err)
			}
			dst := make([]float64, tc.h)
			if err := m.Predict(tc.history, dst); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dst, tc.want) {
				t.Errorf("Predict = %v, want %v", dst, tc.want)
			}
		})
	}
}

// naiveCheckEdges runs the input checks every model shares on the model registered as name.
func naiveCheckEdges(t *testing.T, name string, cfg Config) {
	t.Helper()
	m, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	minH := m.MinHistory()
	ok := make([]float64, minH+3)
	for i := range ok {
		ok[i] = 10 + float64(i%5)
	}
	short := ok[:minH-1]

	t.Run("short history", func(t *testing.T) {
		if _, err := m.Fit(ctx, short); !errors.Is(err, ErrShortHistory) {
			t.Errorf("Fit: err = %v, want ErrShortHistory", err)
		}
		if err := m.Predict(short, make([]float64, 1)); !errors.Is(err, ErrShortHistory) {
			t.Errorf("Predict: err = %v, want ErrShortHistory", err)
		}
	})
	t.Run("nan names its index", func(t *testing.T) {
		bad := slices.Clone(ok)
		bad[2] = math.NaN()
		if _, err := m.Fit(ctx, bad); err == nil || !strings.Contains(err.Error(), "history[2]") {
			t.Errorf("Fit: err = %v, want one naming history[2]", err)
		}
		bad[2] = 10
		bad[len(bad)-1] = math.Inf(-1)
		if err := m.Predict(bad, make([]float64, 1)); err == nil || !strings.Contains(err.Error(), "history["+strconv.Itoa(len(bad)-1)+"]") {
			t.Errorf("Predict: err = %v, want one naming the last index", err)
		}
	})
	t.Run("empty dst", func(t *testing.T) {
		if err := m.Predict(ok, nil); err == nil {
			t.Error("Predict with empty dst: want error")
		}
	})
	t.Run("canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		rep, err := m.Fit(cctx, ok)
		if !errors.Is(err, context.Canceled) || rep.StopReason != StopCanceled {
			t.Errorf("Fit = %+v, %v; want StopCanceled and context.Canceled", rep, err)
		}
	})
}

func TestNaiveEdges(t *testing.T) { naiveCheckEdges(t, "naive", Config{}) }
