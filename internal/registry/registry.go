// Package registry is the name → factory table behind debi's plug-ins (forecasting models,
// scaling algorithms): names are case-insensitive, registering a name twice is a programming
// error found at start-up, and a lookup of an unknown name lists the known ones.
package registry

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Registry maps names to factories of type F.
type Registry[F any] struct {
	kind string
	mu   sync.RWMutex
	m    map[string]F
}

// New returns an empty registry; kind names its entries in errors ("model", "scaling
// algorithm").
func New[F any](kind string) *Registry[F] { return &Registry[F]{kind: kind, m: map[string]F{}} }

func key(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Register adds f under name. It panics on an empty or duplicate name.
func (r *Registry[F]) Register(name string, f F) {
	k := key(name)
	if k == "" {
		panic(fmt.Sprintf("registry: %s registered with an empty name", r.kind))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[k]; dup {
		panic(fmt.Sprintf("registry: %s registered twice: %s", r.kind, k))
	}
	r.m[k] = f
}

// Get returns the factory registered under name, or an error that lists the known names.
func (r *Registry[F]) Get(name string) (F, error) {
	r.mu.RLock()
	f, ok := r.m[key(name)]
	r.mu.RUnlock()
	if !ok {
		return f, fmt.Errorf("unknown %s %q (known: %s)", r.kind, name, strings.Join(r.Names(), ", "))
	}
	return f, nil
}

// Known reports whether name is registered.
func (r *Registry[F]) Known(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.m[key(name)]
	return ok
}

// Names lists the registered names, sorted.
func (r *Registry[F]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
