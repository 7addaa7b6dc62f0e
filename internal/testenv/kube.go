package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// k8sEnvScript is hack/k8s-env.sh, found from this file's place in the module.
func k8sEnvScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "hack", "k8s-env.sh")
}

// StartAPIServer starts a real etcd + kube-apiserver on 127.0.0.1 with hack/k8s-env.sh up
// (KUBEBUILDER_ASSETS=assets, its state in a new temporary directory), for a TestMain. It returns
// the admin kubeconfig's path and the function that stops both and removes the state.
func StartAPIServer(assets string) (kubeconfig string, stop func(), err error) {
	state, err := os.MkdirTemp("", "debi-k8s-")
	if err != nil {
		return "", nil, err
	}
	env := append(os.Environ(), "KUBEBUILDER_ASSETS="+assets, "K8S_STATE="+state)
	run := func(cmd string) ([]byte, error) {
		c := exec.Command(k8sEnvScript(), cmd)
		c.Env = env
		return c.CombinedOutput()
	}
	if out, err := run("up"); err != nil {
		_ = os.RemoveAll(state)
		return "", nil, fmt.Errorf("hack/k8s-env.sh up: %v\n%s", err, out)
	}
	stop = func() {
		if out, err := run("down"); err != nil {
			fmt.Fprintf(os.Stderr, "hack/k8s-env.sh down: %v\n%s", err, out)
		}
		_ = os.RemoveAll(state)
	}
	return filepath.Join(state, "kubeconfig"), stop, nil
}

// APIServer starts a kube-apiserver + etcd of the test's own (DEBI_K8S_ASSETS, else the test
// skips or fails as Env does), stopped at cleanup, and returns its admin kubeconfig's path.
func APIServer(t testing.TB) string {
	t.Helper()
	assets := Env(t, "DEBI_K8S_ASSETS", "kube-apiserver and etcd built by hack/k8s-env.sh build")
	kubeconfig, stop, err := StartAPIServer(assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return kubeconfig
}

// MainAPIServer is the API server of a package's TestMain: the kubeconfig of KUBECONFIG_DEBI
// (one already running), else one started from DEBI_K8S_ASSETS, else none (""; the tests skip).
// stop is never nil.
func MainAPIServer() (kubeconfig string, stop func(), err error) {
	if k := os.Getenv("KUBECONFIG_DEBI"); k != "" {
		return k, func() {}, nil
	}
	assets := os.Getenv("DEBI_K8S_ASSETS")
	if assets == "" {
		return "", func() {}, nil
	}
	return StartAPIServer(assets)
}

// RunWithAPIServer is a package's TestMain body: it sets *kubeconfig from MainAPIServer, runs
// the tests and stops the server; its result is the exit code (1 when the server cannot start).
func RunWithAPIServer(m *testing.M, kubeconfig *string) int {
	k, stop, err := MainAPIServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	*kubeconfig = k
	return m.Run()
}
