package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestRestConfig(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:6443"}
	rc, err := RestConfig(in, "", "debi-test", 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	if rc == in || in.UserAgent != "" || in.QPS != 0 {
		t.Error("the given configuration was changed, not copied")
	}
	if rc.UserAgent != "debi-test" || rc.QPS != 50 || rc.Burst != 100 {
		t.Errorf("user agent %q qps %v burst %d", rc.UserAgent, rc.QPS, rc.Burst)
	}
	in.QPS, in.Burst = 7, 9
	if rc, _ = RestConfig(in, "", "x", 50, 100); rc.QPS != 7 || rc.Burst != 9 {
		t.Errorf("a configured rate was replaced: qps %v burst %d", rc.QPS, rc.Burst)
	}
	if rc, _ = RestConfig(&rest.Config{}, "", "x", 0, 0); rc.QPS != 0 {
		t.Errorf("qps 0 must keep client-go's default, got %v", rc.QPS)
	}

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.2:7443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, err = RestConfig(nil, kc, "x", 0, 0); err != nil || rc.Host != "https://127.0.0.2:7443" {
		t.Errorf("kubeconfig %s: host %v, err %v", kc, rc, err)
	}
	_, err = RestConfig(nil, filepath.Join(t.TempDir(), "missing"), "x", 0, 0)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("a missing kubeconfig: err %v, want one naming --kubeconfig", err)
	}
}
