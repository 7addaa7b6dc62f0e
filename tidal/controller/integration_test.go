package controller_test

// Integration tests on a real kube-apiserver + etcd, started by TestMain with hack/k8s-env.sh up
// when DEBI_K8S_ASSETS=<dir> (what `hack/k8s-env.sh build` prints), or a running one named by
// KUBECONFIG_DEBI=<kubeconfig>; without either they skip (fail under DEBI_REQUIRE_INTEGRATION=1).
// Each test works in its own namespace.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/tidal/controller"
)

var kubeconfigPath string // set by TestMain

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kubeconfigPath)) }

type env struct {
	rc   *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
}

var crdOnce sync.Once

func newEnv(t *testing.T) *env {
	t.Helper()
	if kubeconfigPath == "" {
		testenv.SkipOrFail(t, "integration test: set DEBI_K8S_ASSETS (the dir hack/k8s-env.sh build prints) or KUBECONFIG_DEBI")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	e := &env{rc: rc, kube: kubernetes.NewForConfigOrDie(rc), dyn: dynamic.NewForConfigOrDie(rc)}
	ctx := context.Background()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	e.ns = "debi-tidal-" + hex.EncodeToString(b)
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{}) })
	crdOnce.Do(func() {
		raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "crds", "tidal.io_tidals.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		crds := e.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	})
	// Established, then served: poll a list until it answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.dyn.Resource(controller.TidalResource).Namespace(e.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tidals not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return e
}

func logger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (e *env) getTidal(t *testing.T, name string) *tidalv1.Tidal {
	t.Helper()
	u, err := e.dyn.Resource(controller.TidalResource).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	td := &tidalv1.Tidal{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, td); err != nil {
		t.Fatal(err)
	}
	return td
}

func desired(u *unstructured.Unstructured) int64 {
	v, ok, _ := unstructured.NestedInt64(u.Object, "status", "desiredReplicas")
	if !ok {
		return -1
	}
	return v
}

func (e *env) leaderElection(id string) controller.LeaderElection {
	return controller.LeaderElection{
		Enabled: true, Namespace: e.ns, Identity: id, Client: e.kube.CoordinationV1(),
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
	}
}

// TestIntegrationRuleAtItsSecond: in-process Run (leader-elected) on the real API server. The
// rule that fired before the start is in force right away (desiredReplicas 2); the rule a few
// seconds ahead is written at its second (±1 s), with activeRule, lastScheduleTime and Ready.
func TestIntegrationRuleAtItsSecond(t *testing.T) {
	e := newEnv(t)
	fire := testenv.FireIn(5 * time.Second)
	testenv.RuleTidal(t, e.dyn, e.ns, "tidal-soon", fire, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	reg := prometheus.NewRegistry()
	m := controller.NewMetrics(reg)
	go func() {
		done <- controller.Run(ctx, controller.Options{Client: e.dyn, Namespaces: []string{e.ns}, Logger: logger(t), Metrics: m,
			LeaderElection: e.leaderElection("it-1")})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	ri := e.dyn.Resource(controller.TidalResource).Namespace(e.ns)
	at := testenv.WatchUntil(t, ri, "tidal-soon", 10*time.Second, "desiredReplicas 2", func(u *unstructured.Unstructured) bool { return desired(u) == 2 })
	if !at.Before(fire) {
		t.Fatalf("desiredReplicas 2 only at %s, after the next rule's second %s", at, fire)
	}
	td := e.getTidal(t, "tidal-soon")
	if td.Status.ActiveRule != "earlier" || !td.Status.LastScheduleTime.Time.Equal(fire.Add(-10*time.Minute)) || td.Status.ObservedGeneration != 1 {
		t.Errorf("status at start %+v", td.Status)
	}
	t.Logf("at start (%.1f s before the rule): desiredReplicas 2, activeRule %s, lastScheduleTime %s", fire.Sub(at).Seconds(), td.Status.ActiveRule, td.Status.LastScheduleTime.UTC())

	at = testenv.WatchUntil(t, ri, "tidal-soon", 15*time.Second, "desiredReplicas 7", func(u *unstructured.Unstructured) bool { return desired(u) == 7 })
	late := at.Sub(fire)
	t.Logf("desiredReplicas 7 seen by a watch %v after the rule's second", late)
	if late < 0 || late > time.Second {
		t.Errorf("desiredReplicas 7 seen %v after the rule's second, want within [0, 1 s]", late)
	}
	td = e.getTidal(t, "tidal-soon")
	cond := meta.FindStatusCondition(td.Status.Conditions, controller.ConditionReady)
	if td.Status.ActiveRule != "soon" || !td.Status.LastScheduleTime.Time.Equal(fire) || cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("status after the rule %+v", td.Status)
	}
	t.Logf("Ready: %s %s %q", cond.Status, cond.Reason, cond.Message)
	if v := gauge(t, reg, "debi_tidal_leader"); v != 1 {
		t.Errorf("debi_tidal_leader %v", v)
	}

	// A bad rule: Ready=False InvalidRules, desiredReplicas left at 7.
	u, err := ri.Get(context.Background(), "tidal-soon", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "triggers", "times", "rules")
	rules[0].(map[string]any)["cron"] = "0 0 25 * * *"
	_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "triggers", "times", "rules")
	if _, err := ri.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WatchUntil(t, ri, "tidal-soon", 10*time.Second, "InvalidRules", func(u *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if c.(map[string]any)["reason"] == controller.ReasonInvalidRules {
				return true
			}
		}
		return false
	})
	td = e.getTidal(t, "tidal-soon")
	cond = meta.FindStatusCondition(td.Status.Conditions, controller.ConditionReady)
	if *td.Status.DesiredReplicas != 7 || cond.Status != metav1.ConditionFalse || td.Status.ObservedGeneration != 2 {
		t.Errorf("status after a bad rule %+v", td.Status)
	}
	t.Logf("bad rule: Ready=%s %s %q, desiredReplicas still %d", cond.Status, cond.Reason, cond.Message, *td.Status.DesiredReplicas)
}

// TestIntegrationBinary builds debi and runs `debi tidal-controller` against the API server:
// the rule a few seconds ahead is written at its second, /metrics and /-/ready answer.
func TestIntegrationBinary(t *testing.T) {
	e := newEnv(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "debi")
	build := exec.Command("go", "build", "-o", bin, "github.com/debi-scaler/debi/cmd/debi")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	fire := testenv.FireIn(8 * time.Second)
	testenv.RuleTidal(t, e.dyn, e.ns, "tidal-bin", fire, nil)
	testenv.Start(t, dir, "tidal-controller", bin, "tidal-controller", "--kubeconfig", kubeconfigPath,
		"--namespace", e.ns, "--namespace", "elsewhere", "--leader-elect.namespace", e.ns, "--leader-elect.lease-name", "bin-lease",
		"--web.listen-address", addr, "--log.level", "debug")
	ri := e.dyn.Resource(controller.TidalResource).Namespace(e.ns)
	testenv.WatchUntil(t, ri, "tidal-bin", 20*time.Second, "desiredReplicas 2", func(u *unstructured.Unstructured) bool { return desired(u) == 2 })
	at := testenv.WatchUntil(t, ri, "tidal-bin", 20*time.Second, "desiredReplicas 7", func(u *unstructured.Unstructured) bool { return desired(u) == 7 })
	late := at.Sub(fire)
	t.Logf("binary: desiredReplicas 7 seen by a watch %v after the rule's second", late)
	if late < 0 || late > 2*time.Second { // a separate process under a loaded CI: the issue's ±2 s
		t.Errorf("binary: desiredReplicas 7 %v after the rule's second, want within [0, 2 s]", late)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/-/ready"); code != 200 {
		t.Errorf("/-/ready %d", code)
	}
	if code, _ := get("/-/healthy"); code != 200 {
		t.Errorf("/-/healthy %d", code)
	}
	wants := []string{
		"debi_tidal_leader 1",
		`debi_tidal_rules_evaluations_total{result="ok"}`,
		`debi_tidal_status_writes_total{result="success"} 2`,
		fmt.Sprintf(`debi_tidal_next_activation_timestamp_seconds{name="tidal-bin",namespace=%q}`, e.ns),
		"debi_tidal_activation_write_lateness_seconds_count 1",
	}
	// A watch can see the write before the controller's Update call has
	// returned and counted it, so /metrics is read until it agrees (or 5 s).
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body = get("/metrics")
		missing := 0
		for _, want := range wants {
			if !strings.Contains(body, want) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	lease, err := e.kube.CoordinationV1().Leases(e.ns).Get(context.Background(), "bin-lease", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Errorf("lease %v %v", lease, err)
	}
	var lines bytes.Buffer
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "debi_tidal_") {
			lines.WriteString(line + "\n")
		}
	}
	t.Logf("/metrics:\n%s", lines.String())
}

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
