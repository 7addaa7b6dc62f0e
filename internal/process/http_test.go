package process

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/oklog/run"
)

// TestHTTP serves a handler on 127.0.0.1:0 in a run group and stops with the group: the actor
// returns nil after the shutdown, and the address is free again.
func TestHTTP(t *testing.T) {
	l, err := HTTP{Address: "127.0.0.1:0"}.Listen()
	if err != nil {
		t.Fatal(err)
	}
	h := HTTP{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	var g run.Group
	h.Add(&g, l)
	stop := errors.New("stop")
	ctx, cancel := context.WithCancel(context.Background())
	g.Add(func() error { <-ctx.Done(); return stop }, func(error) { cancel() })
	done := make(chan error, 1)
	go func() { done <- g.Run() }()

	resp, err := http.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("GET / = %d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("run group: %v, want the first actor's error", err)
	}
	l2, err := net.Listen("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("address still in use after the shutdown: %v", err)
	}
	_ = l2.Close()
}

// TestHTTPListener serves the listener it is given rather than Address.
func TestHTTPListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := HTTP{Listener: l, Address: "256.0.0.1:1"}.Listen()
	if err != nil || got != l {
		t.Fatalf("Listen() = %v, %v; want the given listener", got, err)
	}
}
