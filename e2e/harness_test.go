package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/debi-scaler/debi/internal/testenv"
)

// requireEnv returns the value of an environment variable naming a server directory; without
// it the test is skipped, and fails when DEBI_REQUIRE_INTEGRATION=1 (make test sets both).
func requireEnv(t *testing.T, name string) string {
	t.Helper()
	return testenv.Env(t, name, "a directory of real server binaries; run `make test`, which builds and starts them")
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProc starts a server process with its output in dir/name.log, stopped at cleanup.
func startProc(t *testing.T, dir, name string, bin string, args ...string) *exec.Cmd {
	t.Helper()
	return testenv.Start(t, dir, name, bin, args...)
}

// waitHTTP polls url until it answers 200 or the timeout passes.
func waitHTTP(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready after %v", url, timeout)
}

// startKubeAPIServer runs hack/k8s-env.sh up (etcd + kube-apiserver on 127.0.0.1, token auth,
// RBAC) into a temporary state directory and returns the admin kubeconfig.
func startKubeAPIServer(t *testing.T, assets string) string {
	t.Helper()
	state := t.TempDir()
	script := filepath.Join(repoRoot(t), "hack", "k8s-env.sh")
	env := append(os.Environ(), "K8S_STATE="+state, "KUBEBUILDER_ASSETS="+assets)
	var out bytes.Buffer
	up := exec.Command(script, "up")
	up.Env, up.Stdout, up.Stderr = env, &out, &out
	if err := up.Run(); err != nil {
		t.Fatalf("k8s-env.sh up: %v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		down := exec.Command(script, "down")
		down.Env = env
		_ = down.Run()
	})
	return filepath.Join(state, "kubeconfig")
}

// buildDebi builds the debi binary once per test binary.
func buildDebi(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "debi")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/debi")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func promQuery(ctx context.Context, base, q string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b.String())
	}
	return b.String(), nil
}

// killProc kills a process started by startProc with SIGKILL, as a crash or the OOM killer
// would (no shutdown: a Prometheus writes no staleness markers and leaves its WAL as it is), and
// reaps it so that its port is free; the cleanup startProc registered then finds it gone.
func killProc(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill %s: %v", cmd.Path, err)
	}
	_ = cmd.Wait() // "signal: killed"
}

// startLoopServers starts the closed loop's Alertmanager and Prometheus (their configurations
// written by writeServerConfigs into dir) and `debi webhook` (dir/debi.yml, the API server of
// kubeconfig, webhookArgs added) on 127.0.0.1 at their ports, and waits until each answers.
func startLoopServers(t *testing.T, dir, amDir, promDir, debi, kubeconfig string, amPort, promPort, whPort int, webhookArgs ...string) {
	t.Helper()
	startProc(t, dir, "alertmanager", filepath.Join(amDir, "alertmanager"), "--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "am"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=")
	startProc(t, dir, "prometheus", filepath.Join(promDir, "prometheus"), "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort),
		"--rules.alert.resend-delay=1s")
	startProc(t, dir, "webhook", debi, append([]string{"webhook", "--config.file=" + filepath.Join(dir, "debi.yml"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", whPort), "--kubeconfig=" + kubeconfig}, webhookArgs...)...)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/-/ready", amPort), 30*time.Second)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/-/ready", promPort), 30*time.Second)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/-/healthy", whPort), 30*time.Second)
}

// writeServerConfigs writes the closed loop's alertmanager.yml (DebiScaleRecommended routed to
// the webhook at whURL with the token file, fast grouping) and prometheus.yml (1 s scrapes of the
// simulated workload, the exporter and the webhook; rules/ evaluated; alerts to Alertmanager).
func writeServerConfigs(t *testing.T, dir, whURL, token string, amPort int, simAddr string, expPort, whPort int) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "alertmanager.yml"), fmt.Sprintf(`
route:
  receiver: 'null'
  routes:
    - receiver: debi
      matchers: ['debi_route="webhook"']
      group_by: [policy]
      group_wait: 1s
      group_interval: 1s
      repeat_interval: 2s
receivers:
  - name: 'null'
  - name: debi
    webhook_configs:
      - url: %s/v1/alertmanager
        send_resolved: true
        http_config:
          authorization: {credentials_file: %s}
`, whURL, token))
	writeFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [%q, %q]
alerting:
  alertmanagers: [{static_configs: [{targets: ['127.0.0.1:%d']}]}]
scrape_configs:
  - job_name: workload
    static_configs: [{targets: [%q]}]
  - job_name: debi-exporter
    static_configs: [{targets: ['127.0.0.1:%d']}]
  - job_name: debi-webhook
    static_configs: [{targets: ['127.0.0.1:%d']}]
`, filepath.Join(repoRoot(t), "rules", "debi.rules.yaml"), filepath.Join(repoRoot(t), "rules", "debi.alerts.yaml"),
		amPort, simAddr, expPort, whPort))
}
