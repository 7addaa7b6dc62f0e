package hpadiff

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	apidefaults "k8s.io/kubernetes/pkg/apis/autoscaling/v2"
	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	metricsclient "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"

	"github.com/debi-scaler/debi/scaling"
)

const (
	namespace = "default"
	name      = "web"
	// syncPeriod is the controller's --horizontal-pod-autoscaler-sync-period (default 15 s).
	syncPeriod = 15 * time.Second
	// outage in a usage sequence: the metrics API fails at that sync.
	outage = -1
)

func TestMain(m *testing.M) {
	// The controller logs every rescale; HPADIFF_LOG=1 keeps its logs.
	if os.Getenv("HPADIFF_LOG") == "" {
		klog.SetLogger(logr.Discard())
	}
	// utilruntime's default error handlers include a global 1 ms error backoff that remembers
	// the wall-clock time of the last error; inside a synctest bubble (whose clock starts in
	// 2000) it would sleep for decades. Errors (the metrics outages) are expected here: drop them.
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(context.Context, error, string, ...any) {}}
	os.Exit(m.Run())
}

// scenario is one run: a workload, its HPA and what the metrics API reports at each sync.
type scenario struct {
	name     string
	request  int64   // CPU request of each pod, millicores
	target   float64 // target utilization (the HPA holds round(target·100) %)
	min, max int32
	initial  int32 // replicas at start, all Running and Ready
	// startup is how long a new pod stays Pending before it runs Ready: a multiple of 15 s.
	startup time.Duration
	// usage is the total CPU usage (millicores) of the running pods at each sync, or outage.
	usage []int64
	// resize: someone (a person, another tool) sets the scale to n just before sync k.
	resize map[int]int32
	// slowDelete: pods above the spec are deleted one half-tick late, so the sync after a
	// scale-down sees more ready pods than replicas (only with startup 0: every pod is ready).
	slowDelete bool
	// tweak, when set, changes debi's parameters; with "default" the HPA's behavior is then
	// spelled out from them instead of the API defaults.
	tweak func(*scaling.Params)
	// want, when set, is the replica count the controller must reach after the first syncs.
	want map[scaling.HPABehavior][]int32
}

// syncRecord is what one sync of the real controller saw and did.
type syncRecord struct {
	at             time.Time
	current, ready int32 // spec replicas and Running+Ready pods when it read the scale
	usage          int64
	after          int32 // spec replicas after the sync
}

// params are debi's parameters for the scenario.
func (sc scenario) params(b scaling.HPABehavior) scaling.Params {
	p := scaling.DefaultParams()
	p.MinReplicas, p.MaxReplicas, p.Target, p.HPABehavior = sc.min, sc.max, sc.target, b
	if sc.tweak != nil {
		sc.tweak(&p)
	}
	return p
}

// hpaObject is the HPA the controller reconciles: one CPU Resource metric with an
// AverageUtilization target; with "default" the behavior the API server fills in when a
// behavior is given (GenerateHPAScaleUpRules/GenerateHPAScaleDownRules of nil: the scale-down
// stabilisation window stays nil and the controller takes its --horizontal-pod-autoscaler-
// downscale-stabilization), with "none" no behavior at all, as kubectl autoscale creates.
func hpaObject(sc scenario, b scaling.HPABehavior) *autoscalingv2.HorizontalPodAutoscaler {
	pct := int32(math.Round(sc.target * 100))
	min := sc.min
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    &min,
			MaxReplicas:    sc.max,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &pct},
				},
			}},
		},
	}
	switch {
	case b == scaling.BehaviorDefault && sc.tweak == nil:
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   apidefaults.GenerateHPAScaleUpRules(nil),
			ScaleDown: apidefaults.GenerateHPAScaleDownRules(nil),
		}
	case b == scaling.BehaviorDefault:
		h.Spec.Behavior = behaviorFrom(sc.params(b))
	}
	return h
}

// behaviorFrom spells out the behavior debi's parameters describe: Pods and Percent scale-up
// policies over ScaleUpPeriod (selectPolicy Max), one Percent scale-down policy over
// ScaleDownPeriod, and both stabilisation windows.
func behaviorFrom(p scaling.Params) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	sec := func(d time.Duration) int32 { return int32(d / time.Second) }
	ptr := func(v int32) *int32 { return &v }
	maxChange := autoscalingv2.MaxChangePolicySelect
	up := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(sec(p.ScaleUpStabilization)), SelectPolicy: &maxChange}
	if p.ScaleUpPods > 0 {
		up.Policies = append(up.Policies, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: p.ScaleUpPods, PeriodSeconds: sec(p.ScaleUpPeriod)})
	}
	if p.ScaleUpPercent > 0 {
		up.Policies = append(up.Policies, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: int32(p.ScaleUpPercent), PeriodSeconds: sec(p.ScaleUpPeriod)})
	}
	down := &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr(sec(p.ScaleDownStabilization)),
		SelectPolicy:               &maxChange,
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: int32(p.ScaleDownPercent), PeriodSeconds: sec(p.ScaleDownPeriod)}},
	}
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down}
}

// cluster is the world around the controller: the scale subresource, the pods and a kubelet
// that keeps the pods at the scale's spec replicas, and the metrics API.
type cluster struct {
	sc     scenario
	client *fake.Clientset
	first  chan struct{} // closed at the first sync

	mu       sync.Mutex
	spec     int32
	lastSpec int32  // spec at the previous half-tick (slowDelete)
	pods     []*pod // by creation, newest last
	seq      int
	usage    int64 // what the metrics API reports now
	syncs    []syncRecord
}

type pod struct {
	name    string
	created time.Time
	running bool
}

func (c *cluster) readyLocked() int32 {
	var n int32
	for _, p := range c.pods {
		if p.running {
			n++
		}
	}
	return n
}

func (c *cluster) scaleLocked() *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: c.spec},
		Status:     autoscalingv1.ScaleStatus{Replicas: int32(len(c.pods)), Selector: "app=" + name},
	}
}

// getScale is the scale subresource's GET: the controller reads it once at the start of every
// reconcile, so it also records the sync.
func (c *cluster) getScale(core.Action) (bool, runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.syncs) == 0 {
		close(c.first)
	}
	c.syncs = append(c.syncs, syncRecord{at: time.Now(), current: c.spec, ready: c.readyLocked(), usage: c.usage, after: c.spec})
	return true, c.scaleLocked(), nil
}

// updateScale is the controller's rescale.
func (c *cluster) updateScale(a core.Action) (bool, runtime.Object, error) {
	s := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spec = s.Spec.Replicas
	if n := len(c.syncs); n > 0 {
		c.syncs[n-1].after = c.spec
	}
	return true, c.scaleLocked(), nil
}

// metricsAPI implements metricsclient.MetricsClient: per-pod CPU of the running pods, the
// scenario's total spread over them as integers that sum exactly (metrics-server reports no
// Pending pod).
type metricsAPI struct{ c *cluster }

var errOutage = errors.New("metrics API unavailable")

func (m metricsAPI) GetResourceMetric(_ context.Context, res corev1.ResourceName, _ string, _ labels.Selector, container string) (metricsclient.PodMetricsInfo, time.Time, error) {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if res != corev1.ResourceCPU || container != "" {
		return nil, time.Time{}, fmt.Errorf("only pod CPU is served, not %s/%q", res, container)
	}
	if c.usage == outage {
		return nil, time.Time{}, errOutage
	}
	info := metricsclient.PodMetricsInfo{}
	var running []string
	for _, p := range c.pods {
		if p.running {
			running = append(running, p.name)
		}
	}
	if len(running) == 0 {
		return info, now, nil
	}
	n := int64(len(running))
	base, rem := c.usage/n, c.usage%n
	for i, name := range running {
		v := base
		if int64(i) < rem {
			v++
		}
		info[name] = metricsclient.PodMetric{Timestamp: now, Window: 30 * time.Second, Value: v}
	}
	return info, now, nil
}

func (metricsAPI) GetRawMetric(string, string, labels.Selector, labels.Selector) (metricsclient.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, errors.New("no custom metrics")
}

func (metricsAPI) GetObjectMetric(string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, errors.New("no object metrics")
}

func (metricsAPI) GetExternalMetric(string, string, labels.Selector) ([]int64, time.Time, error) {
	return nil, time.Time{}, errors.New("no external metrics")
}

func (c *cluster) podObject(p *pod, now time.Time) *corev1.Pod {
	o := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: "web",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(c.sc.request, resource.DecimalSI),
			}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if p.running {
		setRunning(o, now)
	}
	return o
}

func setRunning(o *corev1.Pod, now time.Time) {
	t := metav1.NewTime(now)
	o.Status.Phase = corev1.PodRunning
	o.Status.StartTime = &t
	o.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t}}
}

// kubelet acts at a half-tick, between two syncs: pods whose start-up delay has passed run
// Ready, then pods are created (Pending, or Running at once without delay) or deleted (newest
// first) until they match the spec replicas.
func (c *cluster) kubelet(ctx context.Context) error {
	now := time.Now()
	c.mu.Lock()
	var started, created, deleted []*pod
	for _, p := range c.pods {
		if !p.running && !now.Before(p.created.Add(c.sc.startup)) {
			p.running = true
			started = append(started, p)
		}
	}
	for int32(len(c.pods)) < c.spec {
		c.seq++
		p := &pod{name: fmt.Sprintf("%s-%05d", name, c.seq), created: now, running: c.sc.startup == 0}
		c.pods = append(c.pods, p)
		created = append(created, p)
	}
	keep := c.spec
	if c.sc.slowDelete {
		keep = max(c.spec, c.lastSpec)
	}
	c.lastSpec = c.spec
	for int32(len(c.pods)) > keep {
		deleted = append(deleted, c.pods[len(c.pods)-1])
		c.pods = c.pods[:len(c.pods)-1]
	}
	c.mu.Unlock()

	pods := c.client.CoreV1().Pods(namespace)
	for _, p := range started {
		if slices.Contains(deleted, p) {
			continue
		}
		o, err := pods.Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setRunning(o, now)
		if _, err := pods.UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	for _, p := range created {
		if slices.Contains(deleted, p) {
			continue
		}
		if _, err := pods.Create(ctx, c.podObject(p, now), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, p := range deleted {
		if slices.Contains(created, p) {
			continue
		}
		if err := pods.Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// restMapper knows apps/v1 Deployment, the scale target.
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	return m
}

// runController runs the real HPA controller through the scenario in a synctest bubble (its
// fake clock stands in for the time.Now the controller calls) and returns every sync.
func runController(t *testing.T, sc scenario, b scaling.HPABehavior) []syncRecord {
	p := sc.params(b)
	var recs []syncRecord
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := &cluster{sc: sc, first: make(chan struct{}), spec: sc.initial, lastSpec: sc.initial, usage: sc.usage[0]}
		c.client = fake.NewClientset(hpaObject(sc, b))
		for range sc.initial { // the initial pods, Running and Ready
			c.seq++
			p := &pod{name: fmt.Sprintf("%s-%05d", name, c.seq), created: time.Now(), running: true}
			c.pods = append(c.pods, p)
			if _, err := c.client.CoreV1().Pods(namespace).Create(ctx, c.podObject(p, time.Now()), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}

		scales := &scalefake.FakeScaleClient{}
		scales.AddReactor("get", "deployments", c.getScale)
		scales.AddReactor("update", "deployments", c.updateScale)

		// A non-zero factory resync, as in kube-controller-manager, so the controller's 15 s
		// handler resync is live too (it never moves the 15 s schedule, the test checks that).
		factory := informers.NewSharedInformerFactory(c.client, 12*time.Hour)
		// cpuInitializationPeriod 0: no running pod is ever inside its CPU initialisation
		// period, so groupPods takes its other branch, which counts a pod unready only when its
		// Ready condition is False — ours is True from the moment it runs. Pending pods are
		// always unready. So readiness is exactly "Pending until its start-up delay has passed,
		// then Running and Ready", and delayOfInitialReadinessStatus (only read for a False
		// Ready condition) is irrelevant: 0.
		hc := podautoscaler.NewHorizontalController(ctx, c.client.CoreV1(), scales, c.client.AutoscalingV2(), restMapper(),
			metricsAPI{c}, factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(),
			syncPeriod, p.ScaleDownStabilization, p.Tolerance, 0, 0)
		factory.Start(ctx.Done())
		done := make(chan struct{})
		go func() {
			defer close(done)
			hc.Run(ctx, 1)
		}()

		<-c.first
		synctest.Wait()
		t0 := time.Now()
		for k := 1; k <= len(sc.usage); k++ {
			// The half-tick before sync k (after the last sync for k = len).
			time.Sleep(time.Until(t0.Add(time.Duration(k-1)*syncPeriod + syncPeriod/2)))
			if k == len(sc.usage) {
				break
			}
			c.mu.Lock()
			if n, ok := sc.resize[k]; ok {
				c.spec = n
			}
			c.usage = sc.usage[k]
			c.mu.Unlock()
			if err := c.kubelet(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		<-done
		factory.Shutdown()

		c.mu.Lock()
		recs = slices.Clone(c.syncs)
		c.mu.Unlock()
		if len(recs) != len(sc.usage) {
			t.Fatalf("%d syncs, want %d", len(recs), len(sc.usage))
		}
		for k, r := range recs {
			if want := t0.Add(time.Duration(k) * syncPeriod); !r.at.Equal(want) {
				t.Fatalf("sync %d at %v, want %v (the 15 s schedule moved)", k, r.at.Sub(t0), want.Sub(t0))
			}
		}
	})
	return recs
}
