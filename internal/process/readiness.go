package process

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/oklog/run"
	"k8s.io/apimachinery/pkg/version"
)

// Readiness is a Kubernetes process's /-/ready: ready once the API server has answered with the
// process's credentials.
type Readiness struct {
	ready atomic.Bool
}

// Err is nil once the API server has answered.
func (r *Readiness) Err() error {
	if !r.ready.Load() {
		return errors.New("API server not reached yet")
	}
	return nil
}

// Add adds to g the actor that asks serverVersion (a discovery client's ServerVersion) every 2s
// until the API server answers; it stops when ctx ends or g is interrupted.
func (r *Readiness) Add(ctx context.Context, g *run.Group, serverVersion func() (*version.Info, error), logger *slog.Logger) {
	rctx, cancel := context.WithCancel(ctx)
	g.Add(func() error {
		for rctx.Err() == nil {
			if _, err := serverVersion(); err == nil {
				r.ready.Store(true)
				logger.Info("API server reachable; ready")
				break
			} else {
				logger.Warn("API server not reachable yet", "err", err)
			}
			select {
			case <-rctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
		<-rctx.Done()
		return nil
	}, func(error) { cancel() })
}
