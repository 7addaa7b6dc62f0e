// Command debi is the predictive autoscaler's single binary. Subcommands:
//
//	debi backtest        replay traces through every policy and print the comparison
//	debi forecast eval   score the forecasting models on traces
//	debi exporter        query Prometheus, run the method, publish the series
//	debi webhook         take Alertmanager and Tidal events, patch replicas; validating admission
//	debi tidal-controller evaluate Tidal cron rules, write status.desiredReplicas
//	debi check config    check configuration files, reporting every error
//	debi demo openmetrics write a trace as a cluster's series under an HPA, for promtool
//	debi version         print the version (as --version does)
//
// Flags follow the Prometheus family (kingpin): double dashes, dotted names, --version,
// --help and --help-long, and promslog's --log.level and --log.format, from which main builds
// the one logger it passes to the packages. main only parses flags into option structs and
// calls the packages' Run functions.
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

	kingpin "github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	_ "github.com/debi-scaler/debi/internal/buildinfo" // a version without -ldflags too
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// action runs a parsed subcommand and returns the process's exit code.
type action func(ctx context.Context, logger *slog.Logger, stdout, stderr io.Writer) int

// newApp declares the command line; actions maps each leaf command (its full name, e.g.
// "forecast eval") to what it runs.
func newApp(stdout, stderr io.Writer) (*kingpin.Application, *promslog.Config, map[string]action) {
	app := kingpin.New("debi", "Predictive autoscaler for Kubernetes: replays traces offline (backtest, forecast eval), "+
		"publishes forecasts and recommendations to Prometheus (exporter) and acts on Alertmanager's alerts (webhook).")
	app.Version(version.Print("debi"))
	app.HelpFlag.Short('h')
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	logCfg := &promslog.Config{Writer: stderr}
	promslogflag.AddFlags(app, logCfg)
	actions := map[string]action{
		"backtest":      backtestCommand(app),
		"forecast eval": forecastCommand(app),
		"exporter":      exporterCommand(app),
		"webhook":       webhookCommand(app),
		"check config":  checkCommand(app),
		"version":       versionCommand(app),
	}
	actions["tidal-controller"] = tidalCommand(app)
	actions["demo openmetrics"] = demoCommand(app)
	return app, logCfg, actions
}

func versionCommand(app *kingpin.Application) action {
	app.Command("version", "Print the version (as --version does).")
	return func(_ context.Context, _ *slog.Logger, stdout, _ io.Writer) int {
		fmt.Fprintln(stdout, version.Print("debi"))
		return 0
	}
}

// joinNegative writes "--flag -1" as "--flag=-1": kingpin would read "-1" as short flags, and
// no flag of debi is a digit.
func joinNegative(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && i+1 < len(args) {
			if n := args[i+1]; len(n) > 1 && n[0] == '-' && (n[1] >= '0' && n[1] <= '9' || n[1] == '.') {
				out = append(out, a+"="+n)
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// exit is what kingpin's terminate function panics with after --help or --version, so that run
// returns where kingpin would end the process.
type exit struct{ code int }

// parse parses args; done reports that kingpin has already answered (--help, --version).
func parse(app *kingpin.Application, args []string) (cmd string, err error, done bool, code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exit)
			if !ok {
				panic(r)
			}
			done, code = true, e.code
		}
	}()
	app.Terminate(func(c int) { panic(exit{c}) })
	cmd, err = app.Parse(args)
	return cmd, err, false, 0
}

func run(args []string, stdout, stderr io.Writer) int {
	app, logCfg, actions := newApp(stdout, stderr)
	if len(args) == 0 {
		app.Usage(nil)
		return 2
	}
	if name := args[0]; !strings.HasPrefix(name, "-") && app.GetCommand(name) == nil && name != "help" {
		fmt.Fprintf(stderr, "debi: unknown command %q, see 'debi --help'\n", name)
		return 2
	}
	args = joinNegative(args)
	for i, a := range args {
		if a == "--help-long" { // kingpin's own handler writes to os.Stdout, not to stdout
			pc, _ := app.ParseContext(append(args[:i:i], args[i+1:]...))
			if err := app.UsageForContextWithTemplate(pc, 2, kingpin.LongHelpTemplate); err != nil {
				fmt.Fprintln(stderr, "debi:", err)
				return 1
			}
			return 0
		}
	}
	cmd, err, done, code := parse(app, args)
	if done {
		return code
	}
	if err != nil {
		hint := "debi"
		if pc, _ := app.ParseContext(args); pc != nil && pc.SelectedCommand != nil {
			hint += " " + pc.SelectedCommand.FullCommand()
		}
		fmt.Fprintf(stderr, "debi: error: %v, see '%s --help'\n", err, hint)
		return 2
	}
	act, ok := actions[cmd]
	if !ok { // "debi help [command]" has printed the help
		return 0
	}
	logger := promslog.New(logCfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return act(ctx, logger, stdout, stderr)
}
