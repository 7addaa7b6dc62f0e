// Package process is the HTTP skeleton shared by debi's long-running subcommands (`debi
// exporter`, `debi webhook`, `debi tidal-controller`): one listener, exporter-toolkit's TLS and
// basic auth (--web.config.file), and a graceful shutdown, as one actor of an oklog/run group.
// The handler — /metrics, /-/healthy, /-/ready, /-/reload and the subcommand's own endpoints — is
// the caller's. Readiness is /-/ready on the API server; ElasticScalers are the webhook's
// ElasticScaler actors, with their Leases.
package process

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/exporter-toolkit/web"
)

// ShutdownTimeout bounds how long a stopping server waits for the requests in flight.
const ShutdownTimeout = 5 * time.Second

// HTTP is the HTTP server of a process.
type HTTP struct {
	// Handler serves every request.
	Handler http.Handler
	// Listener, when set, is served instead of listening on Address (tests listen on
	// 127.0.0.1:0).
	Listener net.Listener
	// Address is --web.listen-address.
	Address string
	// WebConfigFile is exporter-toolkit's TLS and basic-auth file (--web.config.file); empty
	// serves plain HTTP.
	WebConfigFile string
	// ReadTimeout bounds reading a whole request (0: none); the header is always bounded by
	// 10s.
	ReadTimeout time.Duration
	Logger      *slog.Logger
}

// Listen is h.Listener, or a new listener on h.Address.
func (h HTTP) Listen() (net.Listener, error) {
	if h.Listener != nil {
		return h.Listener, nil
	}
	return net.Listen("tcp", h.Address)
}

// Add adds to g an actor serving h.Handler on l until g is interrupted, then shutting the
// server down within ShutdownTimeout; the actor returns nil after a shutdown and the server's
// error otherwise, logging that the server stopped.
func (h HTTP) Add(g *run.Group, l net.Listener) {
	logger := h.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{Handler: h.Handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: h.ReadTimeout}
	webCfg := h.WebConfigFile
	g.Add(func() error {
		err := web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &webCfg}, logger)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		logger.Info("HTTP server stopped", "err", err)
		return err
	}, func(error) {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}
