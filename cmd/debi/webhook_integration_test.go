package main

// The webhook's process (webhookServer, webhook.go) against a real kube-apiserver + etcd, found
// as internal/testenv says: KUBECONFIG_DEBI, else DEBI_K8S_ASSETS (TestMain starts one), else the
// tests skip (or fail with DEBI_REQUIRE_INTEGRATION=1). Each test works in its own namespace.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/debi-scaler/debi/internal/testenv"
)

var kubeconfigPath string // set by TestMain

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kubeconfigPath)) }

// newKubeEnv returns clients for the test API server and a fresh namespace, or skips.
func newKubeEnv(t testing.TB) *testenv.KubeEnv { return testenv.NewKubeEnv(t, kubeconfigPath) }

// TestWebhookElasticScalers: with global.elastic_scalers on, a running webhook puts an
// ElasticScaler created at run time in force (debi_webhook_policy_info), follows a change of its
// spec.debi.mode, keeps it across a reload of the file and drops it when the object is deleted.
func TestWebhookElasticScalers(t *testing.T) {
	began := time.Now()
	e := newKubeEnv(t)
	ctx := context.Background()
	e.ApplyFile(t, "../../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	esGVR := schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}
	testenv.Poll(t, 20*time.Second, "elasticscalers served", func() bool {
		_, err := e.Dyn.Resource(esGVR).Namespace(e.NS).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	file := "global: {elastic_scalers: {enabled: true, namespaces: [" + e.NS + "]}}\n" +
		"webhook: {allow_unauthenticated: true, tidal: {enabled: false}}\n"
	if err := os.WriteFile(cfgFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	url := runWebhook(t, webhookOptions{ConfigFile: cfgFile, RestConfig: e.RC, EnableLifecycle: true}, reg)
	metrics := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor := func(what string, cond func(string) bool) time.Duration {
		t.Helper()
		start := time.Now()
		var body string
		for time.Since(start) < 20*time.Second {
			if body = metrics(); cond(body) {
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "debi_webhook_policy_info") {
				lines = append(lines, l)
			}
		}
		t.Fatalf("timed out waiting for %s; policy info:\n%s", what, strings.Join(lines, "\n"))
		return 0
	}
	policy := `policy="` + e.NS + `.vllm-scaler"`
	es := e.Dyn.Resource(esGVR).Namespace(e.NS)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": "vllm-scaler", "namespace": e.NS},
		"spec": map[string]any{
			"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
			"minReplicas": int64(1), "maxReplicas": int64(10),
			"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
				"scalingAlgorithm": "APA",
				"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
					"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
					"query": `sum(rate(http_requests_total{job="vllm"}[1m]))`}}},
			}},
		},
	}}
	if _, err := es.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitFor("the object's policy", func(b string) bool {
		return strings.Contains(b, `debi_webhook_policy_info{algorithm="apa",mode="act",`+policy+`} 1`)
	})
	t.Logf("created → debi_webhook_policy_info{%s,mode=act} in %v", policy, d.Round(time.Millisecond))

	u, err := es.Get(ctx, "vllm-scaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "shadow", "spec", "debi", "mode")
	if _, err := es.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor("mode shadow", func(b string) bool {
		return strings.Contains(b, `debi_webhook_policy_info{algorithm="apa",mode="shadow",`+policy+`} 1`) &&
			!strings.Contains(b, `mode="act",`+policy)
	})
	t.Logf("spec.debi.mode act → shadow in force in %v", d.Round(time.Millisecond))

	// A reload of a changed file keeps the object's policy.
	if err := os.WriteFile(cfgFile, []byte(file+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, msg := testenv.Request(t, "POST", url+"/-/reload", "", ""); code != 200 {
		t.Fatalf("reload: %d %s", code, msg)
	}
	if b := metrics(); !strings.Contains(b, `debi_webhook_policy_info{algorithm="apa",mode="shadow",`+policy+`} 1`) {
		t.Fatalf("object policy lost on reload")
	}

	if err := es.Delete(ctx, "vllm-scaler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor("the policy gone", func(b string) bool { return !strings.Contains(b, policy) })
	t.Logf("deleted → gone in %v; whole test %v", d.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// TestRunTidalWatchAndLeaderElection runs the whole webhook (newWebhookServer, Run) twice against the API server:
// both serve HTTP, exactly one holds the Lease and watches Tidals; a Tidal's
// status.desiredReplicas (written through the status subresource) reaches the Deployment, a
// pushed event to the follower too (with the bearer token; without it 401); when the leader stops,
// the follower takes the Lease and follows the next Tidal change.
func TestRunTidalWatchAndLeaderElection(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "debi.yml")
	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	pushTokenFile := filepath.Join(dir, "push-token")
	_ = os.WriteFile(pushTokenFile, []byte("push-s3cret\n"), 0o600)
	b, _ := os.ReadFile("testdata/webhook-run-config.yml.tmpl")
	cfgText := strings.NewReplacer("NAMESPACE", e.NS, "PUSHTOKENFILE", pushTokenFile, "TOKENFILE", tokenFile).Replace(string(b))
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	type inst struct {
		srv    *webhookServer
		url    string
		done   chan error
		reg    *prometheus.Registry
		cancel context.CancelFunc
		err    error
		exited bool
	}
	var insts []*inst
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		s, err := newWebhookServer(webhookOptions{ConfigFile: cfgFile, Listener: l, RestConfig: e.RC}, testenv.Logger(t), reg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{srv: s, url: "http://" + l.Addr().String(), done: make(chan error, 1), reg: reg, cancel: cancel}
		go func() { in.done <- s.Run(ctx) }()
		insts = append(insts, in)
	}
	stop := func(in *inst) {
		if in.exited {
			return
		}
		in.cancel()
		select {
		case err := <-in.done:
			in.exited = true
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not stop")
		}
	}
	defer func() {
		for _, in := range insts {
			stop(in)
		}
	}()
	for _, in := range insts {
		testenv.Poll(t, 20*time.Second, "readyz", func() bool {
			resp, err := http.Get(in.url + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	// Exactly one leader.
	var leaders int
	testenv.Poll(t, 20*time.Second, "a leader", func() bool {
		leaders = 0
		for _, in := range insts {
			if testenv.GaugeValue(t, in.reg, "debi_webhook_leader") == 1 {
				leaders++
			}
		}
		return leaders >= 1
	})
	time.Sleep(time.Second)
	leaders = 0
	for _, in := range insts {
		if testenv.GaugeValue(t, in.reg, "debi_webhook_leader") == 1 {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders, want 1", leaders)
	}
	lease, err := e.Kube.CoordinationV1().Leases(e.NS).Get(context.Background(), "debi-webhook", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease %+v, %v", lease, err)
	}

	e.Tidal(t, e.NS, "tidal-frequent-test", "web", 5)
	testenv.Poll(t, 20*time.Second, "watched Tidal to scale web to 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	e.Tidal(t, e.NS, "tidal-frequent-test", "web", 7)
	testenv.Poll(t, 20*time.Second, "watched Tidal to scale web to 7", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 7 })

	// Push, with the push token, to the replica that does not lead: HTTP is served by all. The
	// pushed Tidal is bound by its targetRef, without the label the watch selects, so only the
	// push can act on it; the event's body claims another count, which is not believed.
	e.TidalObject(t, e.NS, "pushed", nil, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, 3)
	body := fmt.Sprintf(`{"namespace":%q,"name":"pushed","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":19}}`, e.NS)
	for _, tc := range []struct {
		token string
		code  int
	}{{"", 401}, {"s3cret", 401}, {"push-s3cret", 200}} {
		req, _ := http.NewRequest(http.MethodPost, insts[1].url+"/v1/tidal", strings.NewReader(body))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("push with token %q: %d, want %d", tc.token, resp.StatusCode, tc.code)
		}
	}
	if got := e.Replicas(t, e.NS, "Deployment", "web"); got != 3 {
		t.Errorf("replicas after push = %d, want 3", got)
	}
	resp, err := http.Get(insts[0].url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb := new(bytes.Buffer)
	_, _ = mb.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(mb.String(), "debi_webhook_build_info") {
		t.Error("/metrics lacks debi_webhook_build_info")
	}

	leader, follower := insts[0], insts[1]
	if testenv.GaugeValue(t, leader.reg, "debi_webhook_leader") != 1 {
		leader, follower = follower, leader
	}
	// A reload of the leader keeps the Lease (one campaign per process, not one per
	// configuration): same holder, no transition, and the restarted watch follows the Tidal.
	before, err := e.Kube.CoordinationV1().Leases(e.NS).Get(context.Background(), "debi-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte(cfgText+"\n# reloaded\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := leader.srv.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	e.Tidal(t, e.NS, "tidal-frequent-test", "web", 6)
	testenv.Poll(t, 20*time.Second, "the reloaded leader to scale web to 6", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 6 })
	after, err := e.Kube.CoordinationV1().Leases(e.NS).Get(context.Background(), "debi-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := func(l *coordinationv1.Lease) (string, int32) {
		return ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseTransitions, 0)
	}
	h0, n0 := holder(before)
	h1, n1 := holder(after)
	if h1 != h0 || n1 != n0 || testenv.GaugeValue(t, leader.reg, "debi_webhook_leader") != 1 {
		t.Errorf("the reload handed the Lease over: holder %s → %s, transitions %d → %d", h0, h1, n0, n1)
	}

	// Failover: stop the leader; the other replica takes the released Lease and follows the Tidal.
	stop(leader)
	testenv.Poll(t, 20*time.Second, "the follower to take the lease", func() bool { return testenv.GaugeValue(t, follower.reg, "debi_webhook_leader") == 1 })
	e.Tidal(t, e.NS, "tidal-frequent-test", "web", 4)
	testenv.Poll(t, 20*time.Second, "the new leader to scale web to 4", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 4 })
}

// TestTidalIntegrationPausedThenUnpaused: a running webhook (its Tidal watch under the Lease,
// resyncs every second) whose policy web is paused, web at 4, and a Tidal asking for 12. Paused
// without a count (paused: true) the change is held; paused at 6 (paused_replicas: 6) web is
// pinned at 6. Either way the Tidal's 12 is not applied, so nothing is recorded in debi.io/applied
// and resyncs write nothing; a reload that lifts the pause restarts the watch, whose initial list
// applies 12, once. Before the fix, paused_replicas recorded 12 as applied when the pin wrote 6:
// [4 6] after the unpause, 12 lost.
func TestTidalIntegrationPausedThenUnpaused(t *testing.T) {
	for _, tc := range []struct {
		name, pause string
		pinned      []int32 // web's history while paused
	}{
		{"paused", "paused: true", []int32{4}},
		{"paused_replicas", "paused_replicas: 6", []int32{4, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newKubeEnv(t)
			e.CRDs(t)
			e.Deployment(t, e.NS, "web", 4)
			h := testenv.WatchReplicas(t, e.Kube, e.NS)
			cfgFile := filepath.Join(t.TempDir(), "debi.yml")
			file := fmt.Sprintf(`policies:
  - name: web
    target: {namespace: %[1]s, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, window: 0s}
webhook:
  mode: act
  allow_unauthenticated: true
  tidal: {enabled: true, resync_period: 1s}
  leader_election: {namespace: %[1]s, lease_duration: 3s, renew_deadline: 2s, retry_period: 500ms}
`, e.NS)
			testenv.WriteFile(t, cfgFile, file+"  policies:\n    - {name: web, "+tc.pause+"}\n")
			reg := prometheus.NewRegistry()
			srv, _ := runWebhookServer(t, webhookOptions{ConfigFile: cfgFile, RestConfig: e.RC}, reg)
			syncs := func() float64 {
				v := testenv.MetricValue(t, reg, "debi_webhook_notifications_total", map[string]string{"endpoint": "watch", "code": "200"})
				if math.IsNaN(v) {
					return 0
				}
				return v
			}
			waitSyncs := func(n int, what string) {
				t.Helper()
				from := syncs()
				testenv.Poll(t, 30*time.Second, fmt.Sprintf("%d Tidal syncs (%s)", n, what), func() bool { return syncs() >= from+float64(n) })
			}
			want := tc.pinned[len(tc.pinned)-1]
			testenv.Poll(t, 20*time.Second, fmt.Sprintf("web at %d", want), func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == want })

			e.Tidal(t, e.NS, "t", "web", 12)
			waitSyncs(3, "the Tidal while paused")
			testenv.WantHistory(t, h, tc.pinned...)
			if a, _, _ := e.TidalApplied(t, "t"); a != "" {
				t.Errorf("debi.io/applied %q while paused (web at %d): the Tidal's 12 recorded as applied", a, want)
			}

			// Unpaused by a reload: the watch restarts and applies the pending 12, once.
			testenv.WriteFile(t, cfgFile, file)
			if err := srv.Reload(); err != nil {
				t.Fatal(err)
			}
			testenv.Poll(t, 30*time.Second, "web at 12 once unpaused", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 12 })
			waitSyncs(3, "resyncs after the unpause")
			testenv.WantHistory(t, h, append(slices.Clone(tc.pinned), 12)...)
			if a, _, _ := e.TidalApplied(t, "t"); a != "1/12/web/"+e.NS+"/Deployment/web" {
				t.Errorf("debi.io/applied %q after the unpause", a)
			}
		})
	}
}
