package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/debi-scaler/debi/exporter"
)

func runExporter(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("debi exporter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := exporter.RegisterFlags(fs)
	logFormat := fs.String("log.format", "logfmt", "Output format of log messages: logfmt or json.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	logger, err := newLogger(stderr, opts.LogLevel, *logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "debi exporter:", err)
		return 2
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := exporter.Run(ctx, *opts, logger, reg); err != nil {
		logger.Error("exporter stopped", "err", err)
		return 1
	}
	return 0
}
