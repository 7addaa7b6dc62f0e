package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/config"
)

// checkCommand is `debi check config FILE...`, as `promtool check config`: every error of every
// file, each with its field path and line; exit 1 if any file has one.
func checkCommand(app *kingpin.Application) action {
	cmd := app.Command("check", "Check resources for validity.").
		Command("config", "Check configuration files: report every error, with its field path and line.")
	files := cmd.Arg("config-files", "The configuration files to check.").Required().Strings()
	return func(_ context.Context, _ *slog.Logger, stdout, stderr io.Writer) int {
		code := 0
		for _, name := range *files {
			fmt.Fprintf(stdout, "Checking %s\n", name)
			b, err := os.ReadFile(name)
			errs := []error{err}
			if err == nil {
				errs = config.Check(b)
			}
			if len(errs) == 0 {
				fmt.Fprintf(stdout, "  SUCCESS: %s is valid debi config file syntax\n", name)
				continue
			}
			code = 1
			fmt.Fprintf(stderr, "  FAILED: %s: %d error(s):\n", name, len(errs))
			for _, e := range errs {
				fmt.Fprintf(stderr, "    %v\n", e)
			}
		}
		return code
	}
}
