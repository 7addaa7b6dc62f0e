package main

// The Tidal controller and the webhook, the two processes of `debi tidal-controller` and
// `debi webhook`, on one real kube-apiserver + etcd of their own: the webhook tests of this
// package share TestMain's API server with a looser Tidal CRD, where this test needs deploy/crds'.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/tidal/controller"
	"github.com/debi-scaler/debi/webhook"
)

// newTidalEnv starts an API server of the test's own (DEBI_K8S_ASSETS; else the test skips or
// fails as testenv.Env says) with deploy/crds' Tidal CRD served, and a namespace.
func newTidalEnv(t *testing.T) *testenv.KubeEnv {
	t.Helper()
	e := testenv.NewKubeEnv(t, testenv.APIServer(t))
	e.ApplyFile(t, "../../deploy/crds/tidal.io_tidals.yaml", "")
	testenv.Poll(t, 30*time.Second, "tidals served", func() bool {
		_, err := e.Dyn.Resource(controller.TidalResource).Namespace(e.NS).List(context.Background(), metav1.ListOptions{})
		return err == nil
	})
	return e
}

// TestIntegrationStateTriggerEndToEnd: the Tidal controller and the webhook (act mode, its Tidal
// watch bound to the Tidal by the elasticscaler.io labels) both run; the Deployment goes to the
// rule in force at start (2), then to 7 within ±2 s of the next rule's second.
func TestIntegrationStateTriggerEndToEnd(t *testing.T) {
	e := newTidalEnv(t)
	ctx := context.Background()
	two := int32(4)
	lbl := map[string]string{"app": "web"}
	if _, err := e.Kube.AppsV1().Deployments(e.NS).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.NS},
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
`, e.NS)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	whReg := prometheus.NewRegistry()
	wh, err := newWebhookServer(webhookOptions{ConfigFile: cfgFile, Listener: l, RestConfig: e.RC}, testenv.Logger(t), whReg)
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
	for testenv.GaugeValue(t, whReg, "debi_webhook_tidal_watch_enabled") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the webhook's Tidal watch did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}

	fire := testenv.FireIn(6 * time.Second)
	testenv.RuleTidal(t, e.Dyn, e.NS, "tidal-e2e", fire, map[string]string{webhook.LabelScalerName: "web", webhook.LabelScalerNamespace: e.NS})
	cctx, ccancel := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- controller.Run(cctx, controller.Options{Client: e.Dyn, Namespaces: []string{e.NS}, Logger: testenv.Logger(t),
			LeaderElection: controller.LeaderElection{
				Enabled: true, Namespace: e.NS, Identity: "e2e", Client: e.Kube.CoordinationV1(),
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
			}})
	}()
	defer func() {
		ccancel()
		if err := <-cdone; err != nil {
			t.Error(err)
		}
	}()
	deps := e.Dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(e.NS)
	specReplicas := func(u *unstructured.Unstructured) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return v
	}
	at := testenv.WatchUntil(t, deps, "web", 10*time.Second, "web at 2", func(u *unstructured.Unstructured) bool { return specReplicas(u) == 2 })
	if !at.Before(fire) {
		t.Fatalf("web at 2 only at %s, after the next rule's second %s", at, fire)
	}
	t.Logf("web scaled 4 → 2 by the rule in force at start, %.1f s before the next rule", fire.Sub(at).Seconds())
	at = testenv.WatchUntil(t, deps, "web", 15*time.Second, "web at 7", func(u *unstructured.Unstructured) bool { return specReplicas(u) == 7 })
	late := at.Sub(fire)
	t.Logf("Deployment web spec.replicas 7 seen by a watch %v after the rule's second", late)
	if late < -2*time.Second || late > 2*time.Second {
		t.Errorf("web at 7 %v after the rule's second, want within ±2 s", late)
	}
}
