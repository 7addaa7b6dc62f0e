package registry

import (
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[func() int]("widget")
	r.Register("Alpha", func() int { return 1 })
	r.Register("beta", func() int { return 2 })
	if f, err := r.Get(" ALPHA "); err != nil || f() != 1 {
		t.Fatalf("case-insensitive lookup: %v", err)
	}
	if !r.Known("BETA") || r.Known("gamma") {
		t.Fatal("Known is wrong")
	}
	_, err := r.Get("gamma")
	if err == nil || !strings.Contains(err.Error(), `unknown widget "gamma" (known: alpha, beta)`) {
		t.Fatalf("unknown name error: %v", err)
	}
	for _, name := range []string{"alpha", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			r.Register(name, func() int { return 3 })
		}()
	}
}
