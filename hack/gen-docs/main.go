// Command gen-docs writes docs/configuration.md, the configuration reference, from the types,
// doc comments and defaults of package config. Run it from the repository root (`make generate`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/debi-scaler/debi/internal/configdoc"
)

func main() { os.Exit(run()) }

func run() int {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	b, err := configdoc.Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-docs:", err)
		return 1
	}
	out := filepath.Join(*root, "docs", "configuration.md")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen-docs:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "wrote", out)
	return 0
}
