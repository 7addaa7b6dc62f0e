package forecast

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestSeasonalNaivePredict(t *testing.T) {
	m, err := New("seasonal-naive", Config{Season: 3})
	if err != nil {
		t.Fatal(err)
	}
	if m.MinHistory() != 3 {
		t.Errorf("MinHistory = %d, want the season, 3", m.MinHistory())
	}
	for _, tc := range []struct {
		name    string
		history []float64
		h       int
		want    []float64
	}{
		// n = 7, season 3: ŷ[7] = y[4] = 5, ŷ[8] = y[5] = 6, ŷ[9] = y[6] = 7, then beyond one
		// season y[t+h−2·3]: ŷ[10] = y[4] = 5, ŷ[11] = 6, ŷ[12] = 7, ŷ[13] = 5.
		{"recursive past one season", []float64{1, 2, 3, 4, 5, 6, 7}, 7, []float64{5, 6, 7, 5, 6, 7, 5}},
		// Exactly one season of history: the season repeats.
		{"one season", []float64{9, 8, 7}, 4, []float64{9, 8, 7, 9}},
		// Horizon shorter than the season.
		{"short horizon", []float64{0, 1, 2, 3}, 1, []float64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rep, err := m.Fit(context.Background(), tc.history); err != nil || rep.StopReason != StopClosedForm {
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

func TestSeasonalNaiveConfig(t *testing.T) {
	m, err := New("seasonal-naive", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if m.MinHistory() != 288 {
		t.Errorf("default MinHistory = %d, want 288 (one day of 5-minute steps)", m.MinHistory())
	}
	if _, err := New("seasonal-naive", Config{Season: -1}); err == nil || !strings.Contains(err.Error(), "season (-1)") {
		t.Errorf("negative season: err = %v, want one naming season", err)
	}
}

func TestSeasonalNaiveEdges(t *testing.T) { naiveCheckEdges(t, "seasonal-naive", Config{Season: 4}) }
