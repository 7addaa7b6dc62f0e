// Command gen-dashboards writes debi's Grafana dashboards (grafana/*.json) from the Go
// definitions in package grafana. Run it from the repository root (`make dashboards`); the
// deploy generator (hack/gen-deploy) then copies the JSON into the dashboard ConfigMaps.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/debi-scaler/debi/grafana"
)

func main() { os.Exit(run()) }

func run() int {
	dir := flag.String("dir", "grafana", "directory to write the dashboard JSON files into")
	flag.Parse()
	files, err := grafana.Dashboards()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-dashboards:", err)
		return 1
	}
	for _, f := range files {
		p := filepath.Join(*dir, f.Name)
		if err := os.WriteFile(p, f.JSON, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen-dashboards:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "wrote", p)
	}
	return 0
}
