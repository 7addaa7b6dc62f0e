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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/tidal/controller"
	"github.com/debi-scaler/debi/webhook"
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

// cronAt is a daily six-field UTC cron for t's second.
func cronAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d %d * * *", t.Second(), t.Minute(), t.Hour())
}

// createTidal creates a Tidal with two daily rules: "earlier", which fired ten minutes ago with
// 2 replicas, and "soon" at fire with 7.
func (e *env) createTidal(t *testing.T, name string, fire time.Time, labels map[string]string) {
	t.Helper()
	td := &tidalv1.Tidal{
		TypeMeta:   metav1.TypeMeta{APIVersion: "tidal.io/v1alpha1", Kind: "Tidal"},
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: labels},
		Spec: tidalv1.TidalSpec{
			TargetRef: tidalv1.TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Namespace: e.ns},
			Triggers: tidalv1.Triggers{Times: &tidalv1.TimeTriggers{Rules: []tidalv1.TimeRule{
				{Name: "earlier", Cron: cronAt(fire.Add(-10 * time.Minute)), Replicas: 2},
				{Name: "soon", Cron: cronAt(fire), Replicas: 7, Description: "a few seconds ahead"},
			}}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(td)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(controller.TidalResource).Namespace(e.ns).Create(context.Background(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("Tidal %s/%s: earlier %q → 2, soon %q → 7 (fires at %s)", e.ns, name, cronAt(fire.Add(-10*time.Minute)), cronAt(fire), fire.UTC().Format("15:04:05"))
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

// watchUntil watches ri's object name and returns the time the first event satisfying cond
// arrived; it fails after timeout.
func watchUntil(t *testing.T, ri dynamic.ResourceInterface, name string, timeout time.Duration, what string, cond func(*unstructured.Unstructured) bool) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond(u) {
		return time.Now()
	}
	w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: u.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		at := time.Now()
		if ev.Type != watch.Modified && ev.Type != watch.Added {
			continue
		}
		if obj, ok := ev.Object.(*unstructured.Unstructured); ok && cond(obj) {
			return at
		}
	}
	t.Fatalf("timed out waiting for %s", what)
	return time.Time{}
}

func desired(u *unstructured.Unstructured) int64 {
	v, ok, _ := unstructured.NestedInt64(u.Object, "status", "desiredReplicas")
	if !ok {
		return -1
	}
	return v
}

// fireIn is the start of the UTC second at least d ahead.
func fireIn(d time.Duration) time.Time { return time.Now().Add(d + time.Second).Truncate(time.Second) }

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
	fire := fireIn(5 * time.Second)
	e.createTidal(t, "tidal-soon", fire, nil)
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
	at := watchUntil(t, ri, "tidal-soon", 10*time.Second, "desiredReplicas 2", func(u *unstructured.Unstructured) bool { return desired(u) == 2 })
	if !at.Before(fire) {
		t.Fatalf("desiredReplicas 2 only at %s, after the next rule's second %s", at, fire)
	}
	td := e.getTidal(t, "tidal-soon")
	if td.Status.ActiveRule != "earlier" || !td.Status.LastScheduleTime.Time.Equal(fire.Add(-10*time.Minute)) || td.Status.ObservedGeneration != 1 {
		t.Errorf("status at start %+v", td.Status)
	}
	t.Logf("at start (%.1f s before the rule): desiredReplicas 2, activeRule %s, lastScheduleTime %s", fire.Sub(at).Seconds(), td.Status.ActiveRule, td.Status.LastScheduleTime.UTC())

	at = watchUntil(t, ri, "tidal-soon", 15*time.Second, "desiredReplicas 7", func(u *unstructured.Unstructured) bool { return desired(u) == 7 })
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
	watchUntil(t, ri, "tidal-soon", 10*time.Second, "InvalidRules", func(u *unstructured.Unstructured) bool {
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

// TestIntegrationStateTriggerEndToEnd: the Tidal controller and the webhook (act mode, its Tidal
// watch bound to the Tidal by the elasticscaler.io labels) both run; the Deployment goes to the
// rule in force at start (2), then to 7 within ±2 s of the next rule's second.
func TestIntegrationStateTriggerEndToEnd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	two := int32(4)
	lbl := map[string]string{"app": "web"}
	if _, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "debi.yml")
	cfg := fmt.Sprintf(`policies:
  - name: web
    target: {namespace: %[1]s, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 1, max_replicas: 20, window: 0s}
webhook:
  mode: act
  allow_unauthenticated: true
  leader_election: {namespace: %[1]s, name: debi-webhook, lease_duration: 3s, renew_deadline: 2s, retry_period: 500ms}
  tidal: {resync_period: 1m}
`, e.ns)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	whReg := prometheus.NewRegistry()
	wh, err := webhook.New(webhook.Options{ConfigFile: cfgFile, Listener: l, RestConfig: e.rc}, logger(t), whReg)
	if err != nil {
		t.Fatal(err)
	}
	whCtx, whCancel := context.WithCancel(ctx)
	whDone := make(chan error, 1)
	go func() { whDone <- wh.Run(whCtx) }()
	defer func() {
		whCancel()
		if err := <-whDone; err != nil {
			t.Errorf("webhook Run: %v", err)
		}
	}()
	// The webhook leads and watches before the Tidal exists.
	deadline := time.Now().Add(20 * time.Second)
	for gauge(t, whReg, "debi_webhook_tidal_watch_enabled") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the webhook's Tidal watch did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}

	fire := fireIn(6 * time.Second)
	e.createTidal(t, "tidal-e2e", fire, map[string]string{webhook.LabelScalerName: "web", webhook.LabelScalerNamespace: e.ns})
	cctx, ccancel := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- controller.Run(cctx, controller.Options{Client: e.dyn, Namespaces: []string{e.ns}, Logger: logger(t),
			LeaderElection: e.leaderElection("e2e")})
	}()
	defer func() {
		ccancel()
		if err := <-cdone; err != nil {
			t.Error(err)
		}
	}()
	deps := e.dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(e.ns)
	specReplicas := func(u *unstructured.Unstructured) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return v
	}
	at := watchUntil(t, deps, "web", 10*time.Second, "web at 2", func(u *unstructured.Unstructured) bool { return specReplicas(u) == 2 })
	if !at.Before(fire) {
		t.Fatalf("web at 2 only at %s, after the next rule's second %s", at, fire)
	}
	t.Logf("web scaled 4 → 2 by the rule in force at start, %.1f s before the next rule", fire.Sub(at).Seconds())
	at = watchUntil(t, deps, "web", 15*time.Second, "web at 7", func(u *unstructured.Unstructured) bool { return specReplicas(u) == 7 })
	late := at.Sub(fire)
	t.Logf("Deployment web spec.replicas 7 seen by a watch %v after the rule's second", late)
	if late < -2*time.Second || late > 2*time.Second {
		t.Errorf("web at 7 %v after the rule's second, want within ±2 s", late)
	}
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
	fire := fireIn(8 * time.Second)
	e.createTidal(t, "tidal-bin", fire, nil)
	testenv.Start(t, dir, "tidal-controller", bin, "tidal-controller", "--kubeconfig", kubeconfigPath,
		"--namespace", e.ns, "--namespace", "elsewhere", "--leader-elect.namespace", e.ns, "--leader-elect.lease-name", "bin-lease",
		"--web.listen-address", addr, "--log.level", "debug")
	ri := e.dyn.Resource(controller.TidalResource).Namespace(e.ns)
	watchUntil(t, ri, "tidal-bin", 20*time.Second, "desiredReplicas 2", func(u *unstructured.Unstructured) bool { return desired(u) == 2 })
	at := watchUntil(t, ri, "tidal-bin", 20*time.Second, "desiredReplicas 7", func(u *unstructured.Unstructured) bool { return desired(u) == 7 })
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
	_, body := get("/metrics")
	for _, want := range []string{
		"debi_tidal_leader 1",
		`debi_tidal_rules_evaluations_total{result="ok"}`,
		`debi_tidal_status_writes_total{result="success"} 2`,
		fmt.Sprintf(`debi_tidal_next_activation_timestamp_seconds{name="tidal-bin",namespace=%q}`, e.ns),
		"debi_tidal_activation_write_lateness_seconds_count 1",
	} {
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
