package forecast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSaveLoadRoundTrip saves fitted models and checks that the loaded copies have the same
// name and config and produce bit-identical forecasts.
func TestSaveLoadRoundTrip(t *testing.T) {
	h := nnSine(200, 4)
	for _, name := range []string{"lstm", "bilstm", "arima"} {
		t.Run(name, func(t *testing.T) {
			f, err := New(name, Config{Window: 6, Hidden: 5, MaxIterations: 20, TimeBudget: time.Minute, Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Fit(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := Save(&buf, f); err != nil {
				t.Fatal(err)
			}
			g, err := Load(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if g.Name() != name || g.(Configured).Config() != f.(Configured).Config() {
				t.Fatalf("loaded %s %+v, saved %s %+v", g.Name(), g.(Configured).Config(), name, f.(Configured).Config())
			}
			want, got := make([]float64, 7), make([]float64, 7)
			if err := f.Predict(h, want); err != nil {
				t.Fatal(err)
			}
			if err := g.Predict(h, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(want, got) {
				t.Errorf("forecasts differ after load: %v vs %v", got, want)
			}
			// A loaded model can be retrained.
			if _, err := g.Fit(context.Background(), h); err != nil {
				t.Errorf("Fit after Load: %v", err)
			}
		})
	}
}

// psNotPersistable is a model that does not implement Persistable.
type psNotPersistable struct{ Forecaster }

func (psNotPersistable) Name() string { return "fake" }

// TestLoadErrors feeds Load damaged and inconsistent files: each must fail with ErrModelFile
// and a message that says what is wrong.
func TestLoadErrors(t *testing.T) {
	f, _ := New("lstm", Config{Window: 4, Hidden: 3})
	var buf bytes.Buffer
	if err := Save(&buf, f); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	state, _ := f.(Persistable).MarshalBinary()
	cfg := func(c Config) []byte { b, _ := json.Marshal(c); return b }
	ar, _ := New("arima", Config{})
	arState, _ := ar.(Persistable).MarshalBinary()
	arBad := slices.Clone(arState)
	arBad[0] = 9 // p = 9: outside the grid
	flip := slices.Clone(good)
	flip[len(good)/2] ^= 0x40
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"bad magic", append([]byte("NOTAMODL"), good[8:]...), "bad magic"},
		{"truncated header", good[:12], "truncated"},
		{"truncated body", good[:len(good)-9], "checksum mismatch"},
		{"flipped bit", flip, "checksum mismatch"},
		{"unknown version", psEncode(2, "lstm", cfg(Config{Window: 4, Hidden: 3}), state), "unknown format version 2"},
		{"unknown model", psEncode(psVersion, "prophet", cfg(Config{}), state), "unknown model"},
		{"shape mismatch", psEncode(psVersion, "lstm", cfg(Config{Window: 4, Hidden: 4}), state), "shape mismatch"},
		{"model mismatch", psEncode(psVersion, "bilstm", cfg(Config{Window: 4, Hidden: 3}), state), "model mismatch"},
		{"truncated state", psEncode(psVersion, "lstm", cfg(Config{Window: 4, Hidden: 3}), state[:40]), "truncated state"},
		{"bad config", psEncode(psVersion, "lstm", []byte("{"), state), "config"},
		{"arima order", psEncode(psVersion, "arima", cfg(Config{}), arBad), "outside the grid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(bytes.NewReader(tc.file))
			if !errors.Is(err, ErrModelFile) {
				t.Fatalf("err %v, want ErrModelFile", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %q does not say %q", err, tc.want)
			}
		})
	}
	t.Run("not persistable", func(t *testing.T) {
		err := Save(&bytes.Buffer{}, psNotPersistable{})
		if err == nil || !strings.Contains(err.Error(), "model fake cannot be saved") {
			t.Errorf("err %v, want 'model fake cannot be saved'", err)
		}
	})
}
