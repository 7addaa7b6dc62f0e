package exporter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/internal/kube"
)

// countingConn is a kubeConn of the configuration rc whose builds are counted and whose build
// fails while fail is set.
func countingConn(rc *rest.Config) (conn *kubeConn, builds *int, fail *error) {
	builds, fail = new(int), new(error)
	conn = &kubeConn{build: func() (*rest.Config, *kube.Clients, error) {
		*builds++
		if *fail != nil {
			return nil, nil, *fail
		}
		c, err := kube.NewClients(rc)
		return rc, c, err
	}}
	return conn, builds, fail
}

// TestKubeConn: the connection is built on first use and kept; a failed build is returned and
// tried again on the next use.
func TestKubeConn(t *testing.T) {
	rc := &rest.Config{Host: "http://127.0.0.1:1"}
	conn, builds, fail := countingConn(rc)
	*fail = errors.New("no kubeconfig")
	if _, _, err := conn.get(); !errors.Is(err, *fail) {
		t.Errorf("a failed build: err %v, want %v", err, *fail)
	}
	*fail = nil
	_, c1, err := conn.get()
	if err != nil || *builds != 2 {
		t.Fatalf("the use after a failed build: err %v, %d builds, want it built again (2)", err, *builds)
	}
	gotRC, c2, err := conn.get()
	if err != nil || c2 != c1 || gotRC != rc || *builds != 2 {
		t.Errorf("a second use: err %v, same clients %v, same configuration %v, %d builds, want the first's and 2 builds",
			err, c2 == c1, gotRC == rc, *builds)
	}

	// The readers of the metrics APIs and of the targets' pods are built from it, and do not
	// build it again.
	s := &sourceClients{build: newSourceClients(conn)}
	k, err := s.get(time.Now())
	if err != nil || k.reader == nil || k.selector == nil || k.pods == nil || *builds != 2 {
		t.Errorf("the readers: %+v, err %v, %d builds, want all three and no build more", k, err, *builds)
	}
}

// TestKubeConnCredentials: the exporter's connection is debi-exporter's, at 50/s with a burst
// of 100, and its clients share the configuration's rate limiter; without credentials it fails,
// naming where they were looked for.
func TestKubeConnCredentials(t *testing.T) {
	rc, c, err := newKubeConn(&rest.Config{Host: "http://127.0.0.1:1"}, "").get()
	if err != nil {
		t.Fatal(err)
	}
	if rc.UserAgent != "debi-exporter" || rc.QPS != 50 || rc.Burst != 100 || rc.RateLimiter == nil {
		t.Errorf("user agent %q qps %v burst %d rate limiter %v", rc.UserAgent, rc.QPS, rc.Burst, rc.RateLimiter)
	}
	if c.Kubernetes.CoreV1().RESTClient().GetRateLimiter() != rc.RateLimiter {
		t.Error("the clients have a rate limiter of their own, not the configuration's")
	}
	_, _, err = newKubeConn(nil, filepath.Join(t.TempDir(), "missing")).get()
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("a missing kubeconfig: err %v, want one naming --kubeconfig", err)
	}
}

// TestServerOneConn: the server's steps and its ElasticScaler source use one connection: the
// steps' readers build it, and Run's source takes it (a failed build is Run's error).
func TestServerOneConn(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte("global: {interval: 1s, elastic_scalers: {enabled: true}}\npolicies:"+reloadPolicy("web", 1, "demand")), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Options{ConfigFile: cfgFile, Querier: &fakeQuerier{}}, nil, nil)
	conn, builds, fail := countingConn(&rest.Config{Host: "http://127.0.0.1:1"})
	s.conn.build = conn.build
	if _, err := s.e.sources.get(time.Now()); err != nil || *builds != 1 {
		t.Fatalf("the steps' readers: err %v, %d builds, want 1", err, *builds)
	}
	if _, _, err := s.conn.get(); err != nil || *builds != 1 {
		t.Errorf("the ElasticScaler source's use: err %v, %d builds, want the steps' connection (1 build)", err, *builds)
	}

	s = newServer(t, Options{ConfigFile: cfgFile, Querier: &fakeQuerier{}}, nil, nil)
	conn, builds, fail = countingConn(&rest.Config{Host: "http://127.0.0.1:1"})
	*fail = errors.New("no kubeconfig")
	s.conn.build = conn.build
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Run(ctx); !errors.Is(err, *fail) || *builds != 1 {
		t.Errorf("Run with ElasticScalers and no credentials: err %v, %d builds, want the connection's error after 1 build", err, *builds)
	}
}
