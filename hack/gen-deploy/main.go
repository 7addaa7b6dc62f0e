// Command gen-deploy writes the generated parts of deploy/ — the PrometheusRule and dashboard
// ConfigMaps of the kustomize base, the Helm chart's copies of rules/, grafana/, the base
// configuration, the ElasticScaler and Tidal CRDs (deploy/crds) and the RBAC sources of
// deploy/base, the kustomize component elastic-scaler's copies of the CRDs and its RBAC, and the
// example overlay's RoleBindings — from their sources. Run it from the repository root after
// changing rules/*.yaml, grafana/*.json, deploy/base/*.yaml, deploy/kustomize/base/debi.yml,
// deploy/kustomize/examples/shop-web/debi.yml or (after hack/crds.sh) deploy/crds/*.yaml
// (`make generate` runs it after the dashboard generator).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/debi-scaler/debi/deploy"
)

func main() { os.Exit(run()) }

func run() int {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	files, err := deploy.Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-deploy:", err)
		return 1
	}
	changed, err := deploy.Write(*root, files)
	for _, c := range changed {
		fmt.Fprintln(os.Stderr, "wrote", c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-deploy:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "gen-deploy: %d files, %d changed\n", len(files), len(changed))
	return 0
}
