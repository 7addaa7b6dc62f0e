package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTidalControllerFlags(t *testing.T) {
	code, out, stderr := runCmd("tidal-controller", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"--kubeconfig", "--namespace=NAMESPACE ...", "--[no-]leader-elect",
		`--leader-elect.namespace="debi-system"`, `--leader-elect.lease-name="debi-tidal-controller"`,
		`--web.listen-address=":9109"`, "--web.config.file"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %s:\n%s", want, out)
		}
	}
	// No cluster: exit 1 with the reason, before listening.
	code, _, stderr = runCmd("tidal-controller", "--kubeconfig", filepath.Join(t.TempDir(), "absent"),
		"--namespace", "a", "--namespace", "b", "--no-leader-elect", "--web.listen-address", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "kubeconfig") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
