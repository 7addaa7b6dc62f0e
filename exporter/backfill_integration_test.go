package exporter

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/debi-scaler/debi/internal/testenv"
)

// TestBackfillRecipe runs the backfill of docs/getting-started.md ("Day one: history") on a
// real Prometheus that holds six hours of the raw series kube-prometheus-stack keeps (cAdvisor's
// CPU counters of two pods, kube-state-metrics' owners) and none of debi's recording rules:
// promtool tsdb create-blocks-from rules over rules/debi.rules.yaml, the blocks moved into the
// data directory, twice — the first pass records the pod-to-workload relabel rule, which the
// second needs to record the workload's CPU use. The rule then has the workload's demand over
// the six hours; after one pass it has none, which is why the recipe has two.
func TestBackfillRecipe(t *testing.T) {
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	const scrape = 30 * time.Second
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := end.Add(-6 * time.Hour)
	perPod := func(ts time.Time) float64 { return 0.4 + 0.2*math.Sin(2*math.Pi*ts.Sub(start).Hours()/6) }
	counter := func(ts time.Time) float64 {
		h := ts.Sub(start).Hours()
		return 1000 + 3600*(0.4*h+0.2*6/(2*math.Pi)*(1-math.Cos(2*math.Pi*h/6)))
	}
	pods := []string{"web-7c9f-a", "web-7c9f-b"}
	var om strings.Builder
	series := func(family string, line func(pod string, ts time.Time) string, each []string) {
		fmt.Fprintf(&om, "# TYPE %s gauge\n", family)
		for _, pod := range each {
			for ts := start.Add(-10 * time.Minute); !ts.After(end); ts = ts.Add(scrape) {
				fmt.Fprintf(&om, "%s %d\n", line(pod, ts), ts.Unix())
			}
		}
	}
	series("container_cpu_usage_seconds_total", func(pod string, ts time.Time) string {
		return fmt.Sprintf(`container_cpu_usage_seconds_total{namespace="shop",pod=%q,container="app",image="shop/web:1"} %g`, pod, counter(ts))
	}, pods)
	series("kube_pod_owner", func(pod string, _ time.Time) string {
		return fmt.Sprintf(`kube_pod_owner{namespace="shop",pod=%q,owner_kind="ReplicaSet",owner_name="web-7c9f"} 1`, pod)
	}, pods)
	series("kube_replicaset_owner", func(string, time.Time) string {
		return `kube_replicaset_owner{namespace="shop",replicaset="web-7c9f",owner_kind="Deployment",owner_name="web"} 1`
	}, []string{""})
	om.WriteString("# EOF\n")

	tmp := t.TempDir()
	promtool := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(filepath.Join(dir, "promtool"), args...).CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	omFile, data := filepath.Join(tmp, "history.om"), filepath.Join(tmp, "data")
	if err := os.WriteFile(omFile, []byte(om.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool("tsdb", "create-blocks-from", "openmetrics", "-q", omFile, data)
	cfgFile := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte("global: {scrape_interval: 15s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	var addr string
	startProm := func(run int) v1.API {
		t.Helper()
		l := listen(t)
		addr = l.Addr().String()
		l.Close()
		cmd = testenv.Start(t, tmp, fmt.Sprintf("prometheus-%d", run), filepath.Join(dir, "prometheus"), "--config.file="+cfgFile,
			"--storage.tsdb.path="+data, "--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn")
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/-/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("prometheus not ready: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		client, err := api.NewClient(api.Config{Address: "http://" + addr})
		if err != nil {
			t.Fatal(err)
		}
		return v1.NewAPI(client)
	}
	rules, err := filepath.Abs("../rules/debi.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const demand = `sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload_type="deployment",workload="web"})`
	r := v1.Range{Start: start.Add(5 * time.Minute), End: end, Step: 5 * time.Minute}
	points := int(r.End.Sub(r.Start)/r.Step) + 1
	q := startProm(0)
	for pass := 1; pass <= 2; pass++ {
		// The recipe: evaluate the rules over the range against the running Prometheus, then
		// move the blocks into its data directory (here with a restart, which loads them at once).
		out := filepath.Join(tmp, fmt.Sprintf("pass%d", pass))
		promtool("tsdb", "create-blocks-from", "rules", "--start", start.Format(time.RFC3339), "--end", end.Format(time.RFC3339),
			"--url", "http://"+addr, "--output-dir", out, rules)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		blocks, _ := os.ReadDir(out)
		if len(blocks) == 0 {
			t.Fatalf("pass %d wrote no block", pass)
		}
		for _, b := range blocks {
			if err := os.Rename(filepath.Join(out, b.Name()), filepath.Join(data, b.Name())); err != nil {
				t.Fatal(err)
			}
		}
		q = startProm(pass)
		m, err := rangeValues(context.Background(), q, demand, r)
		if err != nil {
			t.Fatal(err)
		}
		if pass == 1 {
			if len(m) != 0 {
				t.Fatalf("one pass recorded %d points of the workload's demand: the recipe's second pass proves nothing", len(m))
			}
			continue
		}
		if len(m) != points {
			t.Fatalf("after two passes the rule has %d of %d points", len(m), points)
		}
		for i := range points {
			ts := r.Start.Add(time.Duration(i) * r.Step)
			// rule evaluation at the eval interval (1m) lands on the 5-minute grid; lookback picks it.
			if v, want := m[ts.UnixMilli()], 2*perPod(ts); math.Abs(v-want) > 0.02*want {
				t.Fatalf("backfilled demand at %v: %v, want %v", ts, v, want)
			}
		}
	}
}
