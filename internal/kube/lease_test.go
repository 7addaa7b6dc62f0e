package kube

import (
	"testing"
	"time"
)

// TestLeaseDefaults: zero timings get client-go's recommended 15 s / 10 s / 2 s; set ones stay.
func TestLeaseDefaults(t *testing.T) {
	var d, r, p time.Duration
	LeaseDefaults(&d, &r, &p)
	if d != 15*time.Second || r != 10*time.Second || p != 2*time.Second {
		t.Errorf("defaults %v %v %v, want 15s 10s 2s", d, r, p)
	}
	d, r, p = 3*time.Second, 0, 500*time.Millisecond
	LeaseDefaults(&d, &r, &p)
	if d != 3*time.Second || r != 10*time.Second || p != 500*time.Millisecond {
		t.Errorf("partly set: %v %v %v, want 3s 10s 500ms", d, r, p)
	}
}
