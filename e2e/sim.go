// Package e2e holds debi's closed-loop test: a workload simulator that owns a Deployment on a
// real kube-apiserver and serves cAdvisor- and kube-state-metrics-shaped series driven by a
// trace, scraped by a real Prometheus that evaluates debi's rules, alerts through a real
// Alertmanager to `debi webhook`, which patches the Deployment the simulator reads back.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Sim simulates a Deployment's pods: demand follows a trace (one value per Tick), pods added by
// a scale-up become ready StartupDelay ticks later (kube_pod_created and
// kube_pod_status_ready_time say when), removed pods go at once. It reads the
// replica count from the API server's scale subresource at each tick, as a ReplicaSet
// controller would, and serves the series Prometheus scrapes.
type Sim struct {
	Client     kubernetes.Interface
	Namespace  string
	Deployment string
	Request    float64 // cores per pod
	Demand     []float64
	// RPS, when set, is a second demand, in requests per second (one value per tick, as Demand):
	// served as the counter http_requests_total of each ready pod, shared among them as the CPU.
	RPS          []float64
	StartupDelay int

	mu      sync.Mutex
	step    int
	spec    int32
	pods    []simPod
	nextID  int
	cpu     map[string]float64 // cumulative CPU seconds per pod at lastTick
	reqs    map[string]float64 // cumulative requests per pod at lastTick (RPS)
	last    time.Time          // time of the last tick
	records []Record
}

type simPod struct {
	name    string
	readyAt int
	// created and ready are the wall-clock times kube-state-metrics reports
	// (kube_pod_created, kube_pod_status_ready_time); ready is zero until the pod is.
	created, ready time.Time
}

// Record is what the simulator saw at one tick.
type Record struct {
	Step     int
	Time     time.Time
	Demand   float64
	RPS      float64
	Replicas int32
	Ready    int32
}

// Records returns a copy of the ticks so far.
func (s *Sim) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Run ticks every interval until the trace ends or ctx is done.
func (s *Sim) Run(ctx context.Context, interval time.Duration) error {
	s.mu.Lock()
	s.cpu = map[string]float64{}
	s.reqs = map[string]float64{}
	s.mu.Unlock()
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for i := range s.Demand {
		if err := s.tick(ctx, i, interval); err != nil {
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

func (s *Sim) tick(ctx context.Context, i int, interval time.Duration) error {
	sc, err := s.Client.AppsV1().Deployments(s.Namespace).GetScale(ctx, s.Deployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read scale: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	// Account the CPU of the interval that just ended, spread over the ready pods, so that the
	// counters grow continuously at the demand's rate whatever the scrape phase.
	if i > 0 {
		s.accrueLocked(i-1, now)
	}
	s.last = now
	n := sc.Spec.Replicas
	for int32(len(s.pods)) < n {
		delay, created := s.StartupDelay, now
		if i == 0 {
			// The initial pods are ready from the start, created one start-up before it.
			delay, created = -1, now.Add(-time.Duration(s.StartupDelay)*interval)
		}
		s.pods = append(s.pods, simPod{name: fmt.Sprintf("%s-%05d", s.Deployment, s.nextID), readyAt: i + delay, created: created})
		s.nextID++
	}
	for j := range s.pods {
		if p := &s.pods[j]; p.readyAt <= i && p.ready.IsZero() {
			p.ready = now
		}
	}
	if int32(len(s.pods)) > n {
		for _, p := range s.pods[n:] {
			delete(s.cpu, p.name)
			delete(s.reqs, p.name)
		}
		s.pods = s.pods[:n]
	}
	s.step, s.spec = i, n
	s.records = append(s.records, Record{Step: i, Time: time.Now(), Demand: s.Demand[i], RPS: s.rpsAt(i), Replicas: n, Ready: s.readyLocked(i)})
	return nil
}

// accrueLocked adds the CPU used by the ready pods at step since the last tick up to now.
func (s *Sim) accrueLocked(step int, now time.Time) {
	ready := s.readyLocked(step)
	if ready == 0 || s.last.IsZero() {
		return
	}
	dt := now.Sub(s.last).Seconds()
	for _, p := range s.pods {
		if p.readyAt <= step {
			s.cpu[p.name] += s.Demand[step] / float64(ready) * dt
			if s.RPS != nil {
				s.reqs[p.name] += s.rpsAt(step) / float64(ready) * dt
			}
		}
	}
}

// rpsAt is the request rate at step (0 without RPS).
func (s *Sim) rpsAt(step int) float64 {
	if step < len(s.RPS) {
		return s.RPS[step]
	}
	return 0
}

func (s *Sim) readyLocked(step int) int32 {
	var n int32
	for _, p := range s.pods {
		if p.readyAt <= step {
			n++
		}
	}
	return n
}

// ServeHTTP serves the metrics in the Prometheus text format, shaped like cAdvisor's
// container_cpu_usage_seconds_total and kube-state-metrics' deployment and request series.
func (s *Sim) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	ns, dep := s.Namespace, s.Deployment
	b.WriteString("# TYPE container_cpu_usage_seconds_total counter\n")
	names := make([]string, 0, len(s.cpu))
	for n := range s.cpu {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, p := range s.pods {
		if _, ok := s.cpu[p.name]; !ok {
			s.cpu[p.name] = 0
			names = append(names, p.name)
		}
	}
	// The counters as of now: the last tick's totals plus the current step's use since then.
	ready := s.readyLocked(s.step)
	since := 0.0
	if !s.last.IsZero() {
		since = time.Since(s.last).Seconds()
	}
	isReady := map[string]bool{}
	for _, p := range s.pods {
		isReady[p.name] = p.readyAt <= s.step
	}
	for _, n := range names {
		v := s.cpu[n]
		if isReady[n] && ready > 0 && len(s.Demand) > 0 {
			v += s.Demand[s.step] / float64(ready) * since
		}
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total{namespace=%q,pod=%q,container=\"app\",image=\"sim\"} %g\n", ns, n, v)
	}
	if s.RPS != nil {
		b.WriteString("# TYPE http_requests_total counter\n")
		for _, p := range s.pods {
			v := s.reqs[p.name]
			if isReady[p.name] && ready > 0 {
				v += s.rpsAt(s.step) / float64(ready) * since
			}
			fmt.Fprintf(&b, "http_requests_total{namespace=%q,pod=%q,deployment=%q} %g\n", ns, p.name, dep, v)
		}
	}
	b.WriteString("# TYPE kube_deployment_spec_replicas gauge\n")
	fmt.Fprintf(&b, "kube_deployment_spec_replicas{namespace=%q,deployment=%q} %d\n", ns, dep, s.spec)
	b.WriteString("# TYPE kube_deployment_status_replicas_ready gauge\n")
	fmt.Fprintf(&b, "kube_deployment_status_replicas_ready{namespace=%q,deployment=%q} %d\n", ns, dep, s.readyLocked(s.step))
	b.WriteString("# TYPE kube_pod_container_resource_requests gauge\n")
	for _, p := range s.pods {
		fmt.Fprintf(&b, "kube_pod_container_resource_requests{namespace=%q,pod=%q,container=\"app\",resource=\"cpu\",unit=\"core\"} %g\n", ns, p.name, s.Request)
	}
	// Creation and readiness in whole seconds, as kube-state-metrics reports the API's times.
	b.WriteString("# TYPE kube_pod_created gauge\n")
	for _, p := range s.pods {
		fmt.Fprintf(&b, "kube_pod_created{namespace=%q,pod=%q,uid=%q} %d\n", ns, p.name, "uid-"+p.name, p.created.Unix())
	}
	b.WriteString("# TYPE kube_pod_status_ready_time gauge\n")
	for _, p := range s.pods {
		if !p.ready.IsZero() {
			fmt.Fprintf(&b, "kube_pod_status_ready_time{namespace=%q,pod=%q,uid=%q} %d\n", ns, p.name, "uid-"+p.name, p.ready.Unix())
		}
	}
	b.WriteString("# TYPE kube_pod_owner gauge\n")
	for _, p := range s.pods {
		fmt.Fprintf(&b, "kube_pod_owner{namespace=%q,pod=%q,owner_kind=\"ReplicaSet\",owner_name=%q} 1\n", ns, p.name, dep+"-sim")
	}
	b.WriteString("# TYPE kube_replicaset_owner gauge\n")
	fmt.Fprintf(&b, "kube_replicaset_owner{namespace=%q,replicaset=%q,owner_kind=\"Deployment\",owner_name=%q} 1\n", ns, dep+"-sim", dep)
	b.WriteString("# TYPE debi_e2e_demand_cores gauge\n")
	if len(s.Demand) > 0 {
		fmt.Fprintf(&b, "debi_e2e_demand_cores{namespace=%q,deployment=%q} %g\n", ns, dep, s.Demand[s.step])
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}
