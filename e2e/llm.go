package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// ModelServers simulates the two roles of a disaggregated LLM deployment served by vLLM, each a
// pool of model servers exporting vLLM's metric names, with a slow start-up (StartupDelay
// ticks from a pod's creation to Ready):
//
//   - prefill, a Deployment: each Ready pod processes its share of the prompt tokens
//     (vllm:prompt_tokens_total), and its pods are relabelled to the Deployment through
//     kube-state-metrics-shaped kube_pod_owner and kube_replicaset_owner series;
//   - decode, a custom resource with a scale subresource (a role adapter, as SGLang's
//     RoleBasedGroup or NVIDIA Dynamo expose): the simulator is its controller, creating and
//     deleting real Pod objects on the API server that its status.selector selects, so that
//     debi's exporter finds them as it would a LeaderWorkerSet's; each Ready pod runs up to
//     Batch requests (vllm:num_requests_running), the rest wait
//     (vllm:num_requests_waiting).
//
// In front of them, the router exports the requests it holds for the decode role,
// llm_router_requests_in_flight: measured outside the pods, it is there at zero decode pods,
// the signal that wakes the role from zero.
//
// Both sizes are read from the API server at every tick (the scale subresources), as the
// roles' controllers would.
type ModelServers struct {
	Kube      kubernetes.Interface
	Dyn       dynamic.Interface
	Namespace string
	Prefill   string                      // the prefill Deployment
	Decode    string                      // the decode custom resource
	DecodeGVR schema.GroupVersionResource // its resource
	// Tokens is the prompt tokens per second and Concurrency the requests in flight, per tick.
	Tokens, Concurrency []float64
	Batch               int // the most requests a decode pod runs at once
	StartupDelay        int // ticks from a pod's creation to Ready

	mu      sync.Mutex
	step    int
	last    time.Time
	roles   [2]*rolePods // prefill, decode
	records []LLMRecord
}

// LLMRecord is what the simulator saw at one tick.
type LLMRecord struct {
	Step                      int
	Time                      time.Time
	Tokens, Concurrency       float64
	Prefill, Decode           int32 // the sizes (spec replicas)
	PrefillReady, DecodeReady int32
}

type rolePods struct {
	name   string
	pods   []simPod
	nextID int
	tokens map[string]float64 // cumulative prompt tokens per pod (prefill)
}

// decodeSelector is the label selector of the decode pods (the custom resource's
// status.selector).
const decodeSelector = "app=vllm,role=decode"

// Records returns a copy of the ticks so far.
func (m *ModelServers) Records() []LLMRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]LLMRecord(nil), m.records...)
}

// Run ticks every interval until the traces end or ctx is done.
func (m *ModelServers) Run(ctx context.Context, interval time.Duration) error {
	m.mu.Lock()
	m.roles = [2]*rolePods{{name: m.Prefill, tokens: map[string]float64{}}, {name: m.Decode}}
	m.mu.Unlock()
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for i := range m.Tokens {
		if err := m.tick(ctx, i, interval); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
		}
	}
	return nil
}

func (m *ModelServers) tick(ctx context.Context, i int, interval time.Duration) error {
	pre, err := m.Kube.AppsV1().Deployments(m.Namespace).GetScale(ctx, m.Prefill, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("prefill scale: %w", err)
	}
	dec, err := m.Dyn.Resource(m.DecodeGVR).Namespace(m.Namespace).Get(ctx, m.Decode, metav1.GetOptions{}, "scale")
	if err != nil {
		return fmt.Errorf("decode scale: %w", err)
	}
	n, _, _ := unstructured.NestedInt64(dec.Object, "spec", "replicas")
	now := time.Now()
	m.mu.Lock()
	if i > 0 {
		m.accrueLocked(i-1, now)
	}
	m.last, m.step = now, i
	added, removed := m.roles[1].resize(int32(n), i, now, interval, m.StartupDelay)
	m.roles[0].resize(pre.Spec.Replicas, i, now, interval, m.StartupDelay)
	m.records = append(m.records, LLMRecord{Step: i, Time: now, Tokens: m.Tokens[i], Concurrency: m.Concurrency[i],
		Prefill: pre.Spec.Replicas, Decode: int32(n), PrefillReady: m.roles[0].ready(i), DecodeReady: m.roles[1].ready(i)})
	ready := m.roles[1].ready(i)
	m.mu.Unlock()
	// The decode role's controller: its pods on the API server, its status.
	for _, p := range added {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p, Namespace: m.Namespace, Labels: map[string]string{"app": "vllm", "role": "decode"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "registry.invalid/vllm:sim"}}},
		}
		if _, err := m.Kube.CoreV1().Pods(m.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("decode pod %s: %w", p, err)
		}
	}
	for _, p := range removed {
		if err := m.Kube.CoreV1().Pods(m.Namespace).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			return fmt.Errorf("decode pod %s: %w", p, err)
		}
	}
	status := fmt.Sprintf(`{"status":{"replicas":%d,"readyReplicas":%d,"selector":%q}}`, n, ready, decodeSelector)
	if _, err := m.Dyn.Resource(m.DecodeGVR).Namespace(m.Namespace).Patch(ctx, m.Decode, types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("decode status: %w", err)
	}
	return nil
}

// resize adds or removes pods to n (the initial pods, at tick 0, are Ready from the start) and
// stamps the readiness of those that became Ready; it returns the pods added and removed.
func (r *rolePods) resize(n int32, i int, now time.Time, interval time.Duration, delay int) (added, removed []string) {
	for int32(len(r.pods)) < n {
		p := simPod{name: fmt.Sprintf("%s-%05d", r.name, r.nextID), readyAt: i + delay, created: now}
		if i == 0 {
			p.readyAt, p.created = -1, now.Add(-time.Duration(delay)*interval)
		}
		r.pods = append(r.pods, p)
		r.nextID++
		added = append(added, p.name)
	}
	for int32(len(r.pods)) > n {
		last := r.pods[len(r.pods)-1]
		r.pods = r.pods[:len(r.pods)-1]
		delete(r.tokens, last.name)
		removed = append(removed, last.name)
	}
	for j := range r.pods {
		if p := &r.pods[j]; p.readyAt <= i && p.ready.IsZero() {
			p.ready = now
		}
	}
	return added, removed
}

func (r *rolePods) ready(step int) int32 {
	var n int32
	for _, p := range r.pods {
		if p.readyAt <= step {
			n++
		}
	}
	return n
}

// accrueLocked adds the prompt tokens the Ready prefill pods processed at step up to now.
func (m *ModelServers) accrueLocked(step int, now time.Time) {
	r := m.roles[0]
	ready := r.ready(step)
	if ready == 0 || m.last.IsZero() {
		return
	}
	dt := now.Sub(m.last).Seconds()
	for _, p := range r.pods {
		if p.readyAt <= step {
			r.tokens[p.name] += m.Tokens[step] / float64(ready) * dt
		}
	}
}

// ServeHTTP serves the model servers' vLLM metrics and the kube-state-metrics series of their
// pods, in the Prometheus text format.
func (m *ModelServers) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	ns := m.Namespace
	if m.roles[0] == nil {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		return
	}
	pre, dec := m.roles[0], m.roles[1]
	since := 0.0
	if !m.last.IsZero() {
		since = time.Since(m.last).Seconds()
	}
	b.WriteString("# TYPE vllm:prompt_tokens_total counter\n")
	preReady := pre.ready(m.step)
	for _, p := range pre.pods {
		v := pre.tokens[p.name]
		if p.readyAt <= m.step && preReady > 0 {
			v += m.Tokens[m.step] / float64(preReady) * since
		}
		fmt.Fprintf(&b, "vllm:prompt_tokens_total{namespace=%q,pod=%q,model_name=\"llama\"} %g\n", ns, p.name, v)
	}
	// Decode: the requests in flight spread over the Ready pods, at most Batch running on each.
	decReady := dec.ready(m.step)
	running, waiting := 0.0, m.Concurrency[m.step]
	if decReady > 0 {
		per := m.Concurrency[m.step] / float64(decReady)
		running = math.Min(per, float64(m.Batch))
		waiting = per - running
	}
	b.WriteString("# TYPE vllm:num_requests_running gauge\n# TYPE vllm:num_requests_waiting gauge\n# TYPE vllm:kv_cache_usage_perc gauge\n")
	for _, p := range dec.pods {
		r, wt := 0.0, 0.0
		if p.readyAt <= m.step {
			r, wt = running, waiting
		}
		fmt.Fprintf(&b, "vllm:num_requests_running{namespace=%q,pod=%q,model_name=\"llama\"} %g\n", ns, p.name, r)
		fmt.Fprintf(&b, "vllm:num_requests_waiting{namespace=%q,pod=%q,model_name=\"llama\"} %g\n", ns, p.name, wt)
		fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{namespace=%q,pod=%q,model_name=\"llama\"} %g\n", ns, p.name, r/float64(m.Batch))
	}
	// The router: the decode requests it holds, running or queued, with or without pods.
	b.WriteString("# TYPE llm_router_requests_in_flight gauge\n")
	fmt.Fprintf(&b, "llm_router_requests_in_flight{namespace=%q,model_name=\"llama\",role=\"decode\"} %g\n", ns, m.Concurrency[m.step])
	// kube-state-metrics: readiness, creation and readiness times, and the prefill pods' owners.
	b.WriteString("# TYPE kube_pod_status_ready gauge\n# TYPE kube_pod_created gauge\n# TYPE kube_pod_status_ready_time gauge\n")
	for _, r := range []*rolePods{pre, dec} {
		for _, p := range r.pods {
			ready := 0
			if p.readyAt <= m.step {
				ready = 1
			}
			uid := "uid-" + p.name
			fmt.Fprintf(&b, "kube_pod_status_ready{namespace=%q,pod=%q,uid=%q,condition=\"true\"} %d\n", ns, p.name, uid, ready)
			fmt.Fprintf(&b, "kube_pod_created{namespace=%q,pod=%q,uid=%q} %d\n", ns, p.name, uid, p.created.Unix())
			if !p.ready.IsZero() {
				fmt.Fprintf(&b, "kube_pod_status_ready_time{namespace=%q,pod=%q,uid=%q} %d\n", ns, p.name, uid, p.ready.Unix())
			}
		}
	}
	b.WriteString("# TYPE kube_pod_owner gauge\n")
	for _, p := range pre.pods {
		fmt.Fprintf(&b, "kube_pod_owner{namespace=%q,pod=%q,owner_kind=\"ReplicaSet\",owner_name=%q} 1\n", ns, p.name, m.Prefill+"-sim")
	}
	b.WriteString("# TYPE kube_replicaset_owner gauge\n")
	fmt.Fprintf(&b, "kube_replicaset_owner{namespace=%q,replicaset=%q,owner_kind=\"Deployment\",owner_name=%q} 1\n", ns, m.Prefill+"-sim", m.Prefill)
	b.WriteString("# TYPE kube_deployment_spec_replicas gauge\n# TYPE kube_deployment_status_replicas_ready gauge\n")
	fmt.Fprintf(&b, "kube_deployment_spec_replicas{namespace=%q,deployment=%q} %d\n", ns, m.Prefill, len(pre.pods))
	fmt.Fprintf(&b, "kube_deployment_status_replicas_ready{namespace=%q,deployment=%q} %d\n", ns, m.Prefill, preReady)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}
