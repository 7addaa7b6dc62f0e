package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
)

// TestWebhookRunsHPAOwner: `debi webhook` with global.elastic_scalers (leader election on, the
// process's one Lease, debi-webhook) creates the guide's HPA and runs the object's policy in shadow mode only (the
// Kubernetes HPA scales; debi compares); deleting the object deletes the HPA.
func TestWebhookRunsHPAOwner(t *testing.T) {
	rc := testenv.APIServerConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// Served before the webhook starts: its watches look again only every minute.
	testenv.InstallCRD(ctx, t, dyn, filepath.Join("..", "..", "deploy", "crds", "elasticscaler.io_elasticscalers.yaml"), elasticscaler.Resource,
		"ai-inference", "debi-system")
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	file := "global: {elastic_scalers: {enabled: true, namespaces: [ai-inference]}}\n" +
		"webhook: {allow_unauthenticated: true, tidal: {enabled: false}, leader_election: {retry_period: 500ms}}\n"
	if err := os.WriteFile(cfgFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wh, err := newWebhookServer(webhookOptions{ConfigFile: cfgFile, RestConfig: rc, Listener: l},
		slog.New(slog.NewTextHandler(testenv.LogTo(t), nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	wctx, wstop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wh.Run(wctx) }()
	defer func() {
		wstop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("webhook Run = %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("webhook Run did not stop")
		}
	}()

	fixture, err := os.ReadFile(filepath.Join("..", "..", "apis", "testdata", "guide-hpa.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	es := dyn.Resource(elasticscaler.Resource).Namespace("ai-inference")
	for {
		if _, err = testenv.SSA(ctx, es, testenv.DecodeYAML(t, fixture)); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create the guide's object: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	hpas := kube.AutoscalingV2().HorizontalPodAutoscalers("ai-inference")
	for {
		h, err := hpas.Get(ctx, "hpa-scaling-example", metav1.GetOptions{})
		if err == nil {
			t.Logf("HPA created by the webhook: max %d, owner %s", h.Spec.MaxReplicas, h.OwnerReferences[0].Name)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no HPA: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := kube.CoordinationV1().Leases("debi-system").Get(ctx, "debi-webhook", metav1.GetOptions{}); err != nil {
		t.Fatalf("the process's Lease: %v", err)
	}
	for _, old := range []string{"debi-webhook-hpa", "debi-webhook-status"} { // one Lease per process
		if _, err := kube.CoordinationV1().Leases("debi-system").Get(ctx, old, metav1.GetOptions{}); err == nil {
			t.Errorf("Lease %s exists: the webhook campaigns for one Lease, debi-webhook", old)
		}
	}
	const shadow = `debi_webhook_policy_info{algorithm="hpa",mode="shadow",policy="ai-inference.hpa-scaling-example"} 1`
	var body string
	for !strings.Contains(body, shadow) {
		if ctx.Err() != nil {
			t.Fatalf("policy not in shadow mode; policy info:\n%s", grepLines(body, "debi_webhook_policy_info"))
		}
		time.Sleep(100 * time.Millisecond)
		if resp, err := http.Get("http://" + l.Addr().String() + "/metrics"); err == nil {
			bb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(bb)
		}
	}
	t.Log(shadow)
	if err := es.Delete(ctx, "hpa-scaling-example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := hpas.Get(ctx, "hpa-scaling-example", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("HPA not deleted with the object")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
