package process

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/oklog/run"
	"k8s.io/apimachinery/pkg/version"
)

// TestReadiness: not ready until the API server answers; a refusal is retried (after 2s).
func TestReadiness(t *testing.T) {
	var r Readiness
	if r.Err() == nil {
		t.Fatal("ready before the API server answered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	serverVersion := func() (*version.Info, error) {
		if calls++; calls == 1 {
			return nil, errors.New("connection refused")
		}
		cancel() // the group returns once the actor has seen the answer
		return &version.Info{}, nil
	}
	var g run.Group
	r.Add(ctx, &g, serverVersion, slog.New(slog.DiscardHandler))
	if err := g.Run(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := r.Err(); err != nil || calls != 2 {
		t.Fatalf("Err = %v after %d calls, want nil after 2", err, calls)
	}
}
