package exporter

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/internal/testenv"
)

// The fleet of TestShardFleet: shardCount exporters, one per shard, over shardPolicies policies.
const (
	shardCount    = 3
	shardPolicies = 30
	killedShard   = 1
)

// TestShardFleet runs shardCount real `debi exporter` processes (--shard=i/3) on one
// configuration of 30 hpa policies against a real Prometheus that scrapes them and a synthetic
// workload, and checks through Prometheus's API that:
//
//   - every policy is published by exactly one exporter, the one whose shard Owns its name, and
//     all 30 are there, with fresh steps (inputs present);
//   - after one exporter is killed with SIGKILL, its policies' series go absent (Prometheus's
//     failed scrape marks them stale at once: that is the expected behaviour, and what makes
//     the webhook hold rather than act on a dead exporter's last values) while the other
//     shards' policies keep stepping;
//   - restarted on the same address, the shard brings its policies back, and all 30 are
//     published exactly once again;
//   - at no 1 s step of the whole run did two exporters publish one policy.
func TestShardFleet(t *testing.T) {
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	if testing.Short() {
		t.Skip("integration test takes about 30 s; skipped in -short mode")
	}
	began := time.Now()
	tmp := t.TempDir()
	bin := buildDebiBinary(t, tmp)

	// The split the exporters must compute: each name owned by exactly one shard, none empty.
	names := make([]string, shardPolicies)
	owner := map[string]int{}
	perShard := make([][]string, shardCount)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%02d", i)
		owners := 0
		for s := range shardCount {
			if (Shard{Index: uint32(s), Count: shardCount}).Owns(names[i]) {
				owner[names[i]] = s
				perShard[s] = append(perShard[s], names[i])
				owners++
			}
		}
		if owners != 1 {
			t.Fatalf("policy %s is owned by %d of %d shards", names[i], owners, shardCount)
		}
	}
	for s, ps := range perShard {
		if len(ps) == 0 {
			t.Fatalf("shard %d/%d owns none of the %d policies; pick other names", s, shardCount, shardPolicies)
		}
	}
	sizes := make([]int, shardCount)
	for s, ps := range perShard {
		sizes[s] = len(ps)
	}
	t.Logf("split of %d policies over %d shards: %v", shardPolicies, shardCount, sizes)

	// Addresses: the workload keeps its listener; the exporters bind theirs (a race with another
	// process for a just-freed loopback port is unlikely), and the restarted shard binds the same.
	wlL := listen(t)
	addrs := make([]string, shardCount)
	for i := range addrs {
		l := listen(t)
		addrs[i] = l.Addr().String()
		l.Close()
	}
	promAddr := startFleetPrometheus(t, dir, tmp, wlL.Addr().String(), addrs)
	wlSrv := &http.Server{Handler: &workload{start: time.Now()}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = wlSrv.Serve(wlL) }()
	t.Cleanup(func() { _ = wlSrv.Close() })

	client, err := api.NewClient(api.Config{Address: "http://" + promAddr})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)

	// 30 cheap policies (hpa: no model to train) on distinct targets, all reading the
	// workload's raw series through explicit queries.
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  prometheus_url: http://%s\n  interval: 1s\n  query_timeout: 900ms\npolicies:\n", promAddr)
	for _, name := range names {
		fmt.Fprintf(&cfg, `  - name: %[1]s
    target: {namespace: shop, name: %[1]s}
    algorithm: hpa
    request: 1
    history: 10
    history_step: 1s
    scaling: {min_replicas: 1, max_replicas: 20}
    queries:
      demand: 'sum(rate(container_cpu_usage_seconds_total{namespace="shop",container="app"}[5s]))'
      replicas: 'max(kube_deployment_spec_replicas{namespace="shop",deployment="web"})'
      ready_replicas: 'max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"})'
`, name)
	}
	cfgFile := filepath.Join(tmp, "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	startShard := func(i int, logName string) *exec.Cmd {
		return testenv.Start(t, tmp, logName, bin, "exporter",
			"--config.file="+cfgFile,
			"--web.listen-address="+addrs[i],
			fmt.Sprintf("--shard=%d/%d", i, shardCount),
			"--log.level=warn")
	}
	procs := make([]*exec.Cmd, shardCount)
	for i := range procs {
		procs[i] = startShard(i, fmt.Sprintf("exporter-%d", i))
	}

	// checkSplit compares who publishes what, as Prometheus has it now, with the shards in up:
	// every policy of an up shard exactly once, from its owner's address, and nothing else.
	checkSplit := func(up []int) (bool, string) {
		pub, err := fleetPublishers(prom)
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		for _, name := range names {
			insts := pub[name]
			want := []string(nil)
			if slices.Contains(up, owner[name]) {
				want = []string{addrs[owner[name]]}
			}
			if !slices.Equal(insts, want) {
				bad = append(bad, fmt.Sprintf("%s (shard %d) published by %v, want %v", name, owner[name], insts, want))
			}
		}
		for name := range pub {
			if _, ok := owner[name]; !ok {
				bad = append(bad, "unknown policy "+name)
			}
		}
		if len(bad) > 0 {
			return false, strings.Join(bad, "; ")
		}
		// The exporters' own count agrees with the split.
		for _, s := range up {
			v, err := fleetScalar(prom, fmt.Sprintf(`debi_exporter_policies{instance=%q}`, addrs[s]))
			if err != nil || v != float64(len(perShard[s])) {
				return false, fmt.Sprintf("debi_exporter_policies of shard %d = %v (%v), want %d", s, v, err, len(perShard[s]))
			}
		}
		return true, ""
	}
	var all, survivors []int
	for s := range shardCount {
		all = append(all, s)
		if s != killedShard {
			survivors = append(survivors, s)
		}
	}
	took := fleetEventually(t, 30*time.Second, "all 30 policies published once, by their shard", func() (bool, string) { return checkSplit(all) })
	firstAll := time.Now()
	t.Logf("all %d policies published exactly once by their shard %v after the exporters started", shardPolicies, took.Round(100*time.Millisecond))
	// Fresh steps: every policy's inputs are present (the workload's rate needs two scrapes).
	fleetEventually(t, 20*time.Second, "every policy stepping with its inputs", func() (bool, string) {
		ls, err := fleetByPolicy(prom, `debi_policy_last_success_timestamp_seconds`)
		if err != nil {
			return false, err.Error()
		}
		stale, err := fleetByPolicy(prom, `debi_policy_stale == 0`)
		if err != nil {
			return false, err.Error()
		}
		if len(ls) != shardPolicies || len(stale) != shardPolicies {
			return false, fmt.Sprintf("%d policies with a last success, %d not stale; want %d", len(ls), len(stale), shardPolicies)
		}
		return true, ""
	})
	if ok, why := checkSplit(all); !ok {
		t.Fatalf("split: %s", why)
	}

	// Kill one shard as a crash would.
	killed := procs[killedShard]
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	killAt := time.Now()
	before, err := fleetByPolicy(prom, `debi_policy_last_success_timestamp_seconds`)
	if err != nil {
		t.Fatal(err)
	}
	took = fleetEventually(t, 10*time.Second, "the killed shard's series absent, the others' kept", func() (bool, string) {
		if ok, why := checkSplit(survivors); !ok {
			return false, why
		}
		// Not one debi series of the dead exporter is left for the webhook or the rules to read.
		n, err := fleetVector(prom, fmt.Sprintf(`count({__name__=~"debi_.+",instance=%q})`, addrs[killedShard]))
		if err != nil || len(n) != 0 {
			return false, fmt.Sprintf("series of the killed exporter: %v (%v)", n, err)
		}
		up, err := fleetScalar(prom, fmt.Sprintf(`up{instance=%q}`, addrs[killedShard]))
		if err != nil || up != 0 {
			return false, fmt.Sprintf("up of the killed exporter = %v (%v)", up, err)
		}
		return true, ""
	})
	t.Logf("shard %d/%d killed (SIGKILL): its %d policies absent from Prometheus after %v (stale on the first failed scrape)",
		killedShard, shardCount, len(perShard[killedShard]), took.Round(100*time.Millisecond))
	// The survivors' policies keep stepping: each one's last success moves at least 3 s past
	// the kill, and their loops go on.
	took = fleetEventually(t, 15*time.Second, "the other shards' policies stepping after the kill", func() (bool, string) {
		ls, err := fleetByPolicy(prom, `debi_policy_last_success_timestamp_seconds`)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range survivors {
			for _, name := range perShard[s] {
				if v, ok := ls[name]; !ok || v < float64(killAt.Add(3*time.Second).UnixMilli())/1e3 || v <= before[name] {
					return false, fmt.Sprintf("%s (shard %d): last success %v, %v before the kill at %v", name, s, v, before[name], killAt.Format(time.StampMilli))
				}
			}
			loop, err := fleetScalar(prom, fmt.Sprintf(`debi_exporter_last_loop_timestamp_seconds{instance=%q}`, addrs[s]))
			if err != nil || loop < float64(killAt.Add(3*time.Second).UnixMilli())/1e3 {
				return false, fmt.Sprintf("shard %d: last loop %v (%v)", s, loop, err)
			}
		}
		return true, ""
	})
	t.Logf("the %d policies of the other shards kept stepping (each one's last success ≥ 3 s after the kill, %v after it)",
		shardPolicies-len(perShard[killedShard]), took.Round(100*time.Millisecond))
	if ok, why := checkSplit(survivors); !ok {
		t.Fatalf("after the kill: %s", why)
	}

	// Restart it on the same address: its policies come back, each exactly once.
	restartAt := time.Now()
	startShard(killedShard, fmt.Sprintf("exporter-%d-restarted", killedShard))
	took = fleetEventually(t, 30*time.Second, "all 30 policies back once after the restart", func() (bool, string) {
		if ok, why := checkSplit(all); !ok {
			return false, why
		}
		ls, err := fleetByPolicy(prom, `debi_policy_last_success_timestamp_seconds`)
		if err != nil {
			return false, err.Error()
		}
		for _, name := range perShard[killedShard] {
			if ls[name] <= float64(restartAt.UnixMilli())/1e3 {
				return false, fmt.Sprintf("%s: last success %v, before the restart", name, ls[name])
			}
		}
		return true, ""
	})
	t.Logf("shard %d/%d restarted: all %d policies published exactly once again, with fresh steps, %v after the restart",
		killedShard, shardCount, shardPolicies, took.Round(100*time.Millisecond))

	// Over the whole run, at every 1 s step, no policy had two publishers (a range query reads
	// what Prometheus stored, between the polls above as well), and from the first full split
	// on some policy was published at every step (the survivors' during the outage).
	time.Sleep(1500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end := time.Now()
	val, _, _, err := prom.QueryRange(ctx, `max(count by (policy) (debi_policy_info{job="debi-exporter"}))`,
		v1.Range{Start: began, End: end, Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := val.(model.Matrix)
	points := 0
	for _, ss := range m {
		for _, p := range ss.Values {
			points++
			if p.Value != 1 {
				t.Errorf("at %v a policy had %v publishers", p.Timestamp.Time().Format(time.StampMilli), p.Value)
			}
		}
	}
	if want := int(end.Sub(firstAll)/time.Second) - 1; points < want {
		t.Fatalf("%d points of max(count by (policy) (debi_policy_info)) over the run, want at least %d (one per second since the first full split)", points, want)
	}
	t.Logf("max(count by (policy) (debi_policy_info)) = 1 at all %d steps of 1 s; test took %v", points, time.Since(began).Round(time.Second))
}

// buildDebiBinary builds ./cmd/debi into dir.
func buildDebiBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "debi")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/debi")
	cmd.Dir = ".." // the module root: go test runs in the package's directory
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/debi: %v\n%s", err, out)
	}
	return bin
}

// startFleetPrometheus runs the real Prometheus from dir (1 s scrape interval, no rules) scraping
// the workload and the exporters, under job debi-exporter, and returns its API address.
func startFleetPrometheus(t *testing.T, dir, tmp, workloadAddr string, exporters []string) string {
	t.Helper()
	quoted := make([]string, len(exporters))
	for i, a := range exporters {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: workload
    static_configs: [{targets: [%q]}]
  - job_name: debi-exporter
    static_configs: [{targets: [%s]}]
`, workloadAddr, strings.Join(quoted, ", "))
	file := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	addr := l.Addr().String()
	l.Close()
	testenv.Start(t, tmp, "prometheus", filepath.Join(dir, "prometheus"),
		"--config.file="+file,
		"--storage.tsdb.path="+filepath.Join(tmp, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	fleetEventually(t, 30*time.Second, "prometheus ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return addr
}

// fleetEventually polls cond every 250 ms until it holds and returns how long that took; after
// timeout it fails the test with cond's last explanation.
func fleetEventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %v: %s", what, timeout, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fleetVector runs an instant query now.
func fleetVector(prom v1.API, q string) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, _, _, err := prom.Query(ctx, q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: %s, want a vector", q, v.Type())
	}
	return vec, nil
}

// fleetScalar is the value of a query that must return one series.
func fleetScalar(prom v1.API, q string) (float64, error) {
	vec, err := fleetVector(prom, q)
	if err != nil {
		return 0, err
	}
	if len(vec) != 1 {
		return 0, fmt.Errorf("%s: %d series", q, len(vec))
	}
	return float64(vec[0].Value), nil
}

// fleetByPolicy maps the policy label of a query's series to their value; a policy with several
// series is an error.
func fleetByPolicy(prom v1.API, q string) (map[string]float64, error) {
	vec, err := fleetVector(prom, q)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range vec {
		p := string(s.Metric["policy"])
		if _, dup := out[p]; dup {
			return nil, fmt.Errorf("%s: several series of policy %s", q, p)
		}
		out[p] = float64(s.Value)
	}
	return out, nil
}

// fleetPublishers maps each policy to the sorted instances of job debi-exporter that publish its
// debi_policy_info.
func fleetPublishers(prom v1.API) (map[string][]string, error) {
	vec, err := fleetVector(prom, `debi_policy_info{job="debi-exporter"}`)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, s := range vec {
		if s.Value != 1 {
			return nil, fmt.Errorf("debi_policy_info %v = %v", s.Metric, s.Value)
		}
		p := string(s.Metric["policy"])
		out[p] = append(out[p], string(s.Metric["instance"]))
	}
	for _, insts := range out {
		sort.Strings(insts)
	}
	return out, nil
}
