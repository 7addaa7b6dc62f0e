// Command debi is the predictive autoscaler's single binary. Subcommands:
//
//	debi backtest        replay traces through every policy and print the comparison
//	debi forecast eval   score the forecasting models on traces
//	debi exporter        query Prometheus, run the method, publish the series
//	debi webhook         take Alertmanager and Tidal events, patch replicas
//	debi version         print the version
//
// main only parses flags into option structs and calls the packages' Run functions.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/common/version"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"backtest", "replay traces through scaling policies and print the paper's comparison", runBacktest},
		{"forecast", "forecast eval: score the forecasting models on traces", runForecast},
		{"exporter", "query Prometheus, run the method and publish forecast, high-water, target and replica series", runExporter},
		{"webhook", "receive Alertmanager and Tidal events and patch replicas through the scale subresource", runWebhook},
		{"version", "print the version", func(_ context.Context, _ []string, stdout, _ io.Writer) int {
			fmt.Fprintln(stdout, version.Print("debi"))
			return 0
		}},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: debi <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'debi <command> -h' for a command's flags.")
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "debi: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// newLogger builds the slog logger of the --log.level and --log.format flags.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "logfmt", "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log.format: %q is not one of logfmt, json", format)
}
