package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/kube"
)

// The pods of a target of any kind. kube-state-metrics relabels the pods of Deployments and
// StatefulSets to their workload, and the recording rules build every default query on that;
// for any other kind with a scale subresource (an Argo Rollout, a LeaderWorkerSet, a KServe
// InferenceService, a serving framework's role adapter) nothing does. So the exporter reads,
// at every step, the target's scale subresource (spec.replicas and status.selector, as the HPA
// reads them) and the pods the selector selects, and publishes them as debi_target_pod_info and
// debi_target_spec_replicas; the rules relabel those pods as they relabel a Deployment's
// (config.Target.PodsFromScale), so demand, requests, memory, the ready count and the size
// are the same queries for every kind.

// TargetPods is what a target's scale subresource says: its size (spec.replicas) and the pods
// its status.selector selects, by name.
type TargetPods struct {
	Replicas int32
	Pods     []string
}

// TargetPodsFunc reads the TargetPods of a target.
type TargetPodsFunc func(ctx context.Context, t config.Target) (TargetPods, error)

// targetPodsRead is the step's read of one target's pods.
type targetPodsRead struct {
	ok       bool // read: pods and replicas are the target's
	pods     []string
	replicas float64
	err      error
	reason   string // of err (sourceReason)
}

// ScaleTargetPods is the TargetPodsFunc of the API server of c: a get of the target's scale
// subresource, then a list of the pods of its namespace that status.selector selects. A scale
// subresource without status.selector (a custom resource whose CRD sets no labelSelectorPath)
// is an error (reason no_pod_selector) that says so.
func ScaleTargetPods(c *kube.Clients) TargetPodsFunc {
	scale := readScale(c)
	return func(ctx context.Context, t config.Target) (TargetPods, error) {
		s, err := scale(ctx, t)
		if err != nil {
			return TargetPods{}, err
		}
		pods, err := c.Kubernetes.CoreV1().Pods(t.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.selector.String(), ResourceVersion: "0"})
		if err != nil {
			return TargetPods{}, fmt.Errorf("pods of %s (selector %q): %w", t, s.selector, err)
		}
		out := TargetPods{Replicas: s.replicas, Pods: make([]string, 0, len(pods.Items))}
		for _, p := range pods.Items {
			out.Pods = append(out.Pods, p.Name)
		}
		slices.Sort(out.Pods)
		return out, nil
	}
}

// readTargetPods reads the pods of every target of the shard whose pods come from its scale
// subresource, each target once whatever the number of its policies, and leaves the result in
// each policy's state for its snapshot. A failed read publishes no pods and no size: the
// default queries then find no data, the policy is stale, and nothing scales down.
func (e *Exporter) readTargetPods(ctx context.Context) {
	var want []*policyState
	for _, ps := range e.policies {
		if ps.cfg.Target.PodsFromScale() {
			want = append(want, ps)
		}
	}
	if len(want) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, e.interval)
	defer cancel()
	fn, err := e.sources.targetPods(e.now())
	// Each target once, at most targetPodsConcurrency at a time.
	reads := map[string]*targetPodsRead{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, targetPodsConcurrency)
	for _, ps := range want {
		key := ps.cfg.Target.Identity()
		if _, ok := reads[key]; ok {
			continue
		}
		r := &targetPodsRead{}
		reads[key] = r
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			*r = readTarget(ctx, fn, err, ps.cfg.Target)
		})
	}
	wg.Wait()
	for _, ps := range want {
		e.noteTargetPods(ps, *reads[ps.cfg.Target.Identity()])
	}
}

// targetPodsConcurrency bounds the targets read at once (two API requests each).
const targetPodsConcurrency = 10

func readTarget(ctx context.Context, fn TargetPodsFunc, err error, t config.Target) targetPodsRead {
	var r targetPodsRead
	if err == nil {
		var tp TargetPods
		if tp, err = fn(ctx, t); err == nil {
			r.ok, r.pods, r.replicas = true, tp.Pods, float64(tp.Replicas)
			return r
		}
	}
	r.err, r.reason = err, sourceReason(err)
	return r
}

// noteTargetPods keeps a policy's read, counts a failure and logs each transition: failing (or
// failing for another reason), and back.
func (e *Exporter) noteTargetPods(ps *policyState, r targetPodsRead) {
	prev := ps.targetPods.reason
	ps.targetPods = r
	if r.err == nil {
		if prev != "" {
			e.log.Info("target's pods read from its scale subresource again", "policy", ps.cfg.Name, "target", ps.cfg.Target.String(), "pods", len(r.pods))
		}
		return
	}
	ps.targetPodsErrors++
	if prev != r.reason {
		e.log.Warn("target's pods not read from its scale subresource: its default queries have no data and it does not scale down",
			"policy", ps.cfg.Name, "field", ps.path+".target", "target", ps.cfg.Target.String(), "reason", r.reason, "err", r.err)
	}
}

// scaleInfo is a target's scale subresource: its size and its pods' selector.
type scaleInfo struct {
	replicas int32
	selector labels.Selector
}

// errNoStatusSelector: the scale subresource publishes no status.selector (reason
// no_pod_selector).
var errNoStatusSelector = errors.New("its scale subresource has no status.selector (a custom resource's CRD must set the scale subresource's labelSelectorPath)")

// readScale reads a target's scale subresource through c, whose RESTMapper rediscovers a CRD
// installed since.
func readScale(c *kube.Clients) func(ctx context.Context, t config.Target) (scaleInfo, error) {
	return func(ctx context.Context, t config.Target) (scaleInfo, error) {
		gv, err := schema.ParseGroupVersion(t.APIVersion)
		if err != nil {
			return scaleInfo{}, err
		}
		m, err := c.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: t.Kind}, gv.Version)
		if err != nil {
			return scaleInfo{}, err
		}
		u, err := c.Dynamic.Resource(m.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{}, "scale")
		if err != nil {
			return scaleInfo{}, err
		}
		return parseScale(u)
	}
}

// parseScale reads an autoscaling/v1 Scale: spec.replicas (absent: 0) and status.selector.
func parseScale(u *unstructured.Unstructured) (scaleInfo, error) {
	n, _, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil || n < 0 || n > math.MaxInt32 {
		return scaleInfo{}, fmt.Errorf("its scale subresource's spec.replicas is not a replica count: %v", u.Object["spec"])
	}
	s, _, _ := unstructured.NestedString(u.Object, "status", "selector")
	if s == "" {
		return scaleInfo{}, errNoStatusSelector
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return scaleInfo{}, fmt.Errorf("its scale subresource's status.selector %q: %w", s, err)
	}
	return scaleInfo{replicas: int32(n), selector: sel}, nil
}
