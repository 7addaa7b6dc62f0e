package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/debi-scaler/debi/webhook"
)

// runWebhook is `debi webhook`. ctx ends on SIGINT or SIGTERM; webhook.Run itself reloads the
// configuration on SIGHUP and POST|PUT /-/reload, and finds the cluster as kubectl does
// (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster).
func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("debi webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := webhook.RegisterFlags(fs)
	logLevel := fs.String("log.level", "info", "Only log messages with the given severity or above: debug, info, warn, error.")
	logFormat := fs.String("log.format", "logfmt", "Output format of log messages: logfmt or json.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "debi webhook:", err)
		return 2
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := webhook.Run(ctx, *opts, logger, reg); err != nil {
		logger.Error("webhook stopped", "err", err)
		return 1
	}
	return 0
}
