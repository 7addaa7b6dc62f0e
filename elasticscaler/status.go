package elasticscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/kube"
	"github.com/debi-scaler/debi/policy"
)

// RefError is the error of StatusOptions.Get for a targetRef that names nothing the API server
// serves (an api_version that does not parse, a kind discovery does not know): a fault of the
// object, reported in its Validated condition with Err's message.
type RefError struct{ Err error }

func (e *RefError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RefError) Unwrap() error { return e.Err }

// StatusOptions configure a StatusWriter.
type StatusOptions struct {
	// Dynamic writes the status subresource; Discovery tells whether ElasticScalers are served.
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Get reads a targetRef's object (the webhook's dynamic client and RESTMapper, as for
	// targets); a *RefError when the reference names nothing served.
	Get func(ctx context.Context, t config.Target) (*unstructured.Unstructured, error)
	// Recorder records the Events on the objects (nil: none).
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// File is the configuration file's part in force (its policies win any conflict).
	File func() *config.Config
	// Namespaces to watch; empty watches every namespace.
	Namespaces []string
	// Informers is the process's informer cache (nil: Run builds its own over Namespaces).
	Informers *kube.Informers
	// HPAProblems are the HPA owner's problems by namespace/name (Owner.Problems), reported in
	// the objects' Validated condition; nil without an owner.
	HPAProblems func() map[string]string
	// Recheck is how often discovery is asked again while ElasticScalers are not served
	// (default 1m).
	Recheck time.Duration
}

// StatusWriter writes the status of ElasticScalers (conditions Validated, MetricsPipeline,
// ScalingCalculated and the last decision's fields) through the status subresource, and
// records Events on them.
//
// Validation (the Validated condition and its ValidationFailed Events) is the Lease holder's
// only, so that replicas never disagree about it. A decision is reported by the replica that
// made it (Alertmanager may notify any replica): each write sets only its own conditions and
// fields on a fresh read, retried on conflict.
type StatusWriter struct {
	dyn       dynamic.Interface
	discovery discovery.DiscoveryInterface
	// get reads a targetRef's object (the dynamic client and the RESTMapper, as for targets).
	get func(ctx context.Context, t config.Target) (*unstructured.Unstructured, error)
	rec record.EventRecorder
	log *slog.Logger
	// file is the configuration file's part in force (its policies win any conflict).
	file       func() *config.Config
	namespaces []string
	// informers is the process's informer cache (nil: run builds its own over namespaces).
	informers *kube.Informers
	// interval is the least time between two status writes of one object, and the period of
	// the retry pass; recheck is how long the cluster checks of a valid object are trusted.
	interval, recheck time.Duration
	// discoveryRecheck is how often discovery is asked again while the resource is not served.
	discoveryRecheck time.Duration
	now              func() time.Time

	leader atomic.Bool
	kick   chan struct{}
	// hpaProblems are the HPA owner's problems by namespace/name (a foreign HPA in the way, an
	// HPA it cannot build), set before the writer runs; nil without one.
	hpaProblems func() map[string]string

	mu     sync.Mutex
	store  []cache.Store
	seq    uint64
	obs    map[string]*Decision // last decision by policy name
	obsSeq map[string]uint64
	state  map[string]*objState // by namespace/name
	// withPolicies caches the file's checks of the objects' policies.
	wpKey  string
	wpErrs map[string][]string
}

// objState is what the writer remembers of one object.
type objState struct {
	lastWrite time.Time
	// applied is the sequence number of the last decision written.
	applied uint64
	// cluster checks: their result, for which resourceVersion, and when.
	checkRV   string
	checkMsgs []string
	checked   time.Time
	// eventMsg is the last Validated message reported by an Event ("" when valid).
	eventMsg string
}

// NewStatusWriter returns a StatusWriter; Run starts it.
func NewStatusWriter(o StatusOptions) *StatusWriter {
	if o.Recheck <= 0 {
		o.Recheck = time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &StatusWriter{dyn: o.Dynamic, discovery: o.Discovery, get: o.Get, rec: o.Recorder, log: log, file: o.File,
		namespaces: o.Namespaces, informers: o.Informers, hpaProblems: o.HPAProblems, discoveryRecheck: o.Recheck,
		interval: 3 * time.Second, recheck: 30 * time.Second, now: time.Now, kick: make(chan struct{}, 1),
		obs: map[string]*Decision{}, obsSeq: map[string]uint64{}, state: map[string]*objState{}}
}

// SetLeader tells the writer whether this replica holds the status Lease: validation is the
// holder's only.
func (w *StatusWriter) SetLeader(b bool) {
	w.leader.Store(b)
	w.poke()
}

func (w *StatusWriter) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run watches the ElasticScalers and writes their status until ctx ends.
func (w *StatusWriter) Run(ctx context.Context) error {
	for logged := false; !served(w.discovery); logged = true {
		if !logged {
			w.log.Info("status writer waiting: elasticscalers not served")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.discoveryRecheck):
		}
	}
	inf := w.informers
	if inf == nil { // alone (tests): a cache of its own
		nss := w.namespaces
		if len(nss) == 0 {
			nss = []string{metav1.NamespaceAll}
		}
		inf = kube.NewInformers(w.dyn, nss...)
		inf.Start(ctx)
		defer inf.Shutdown()
	}
	watch, err := inf.Watch(Resource, cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { w.poke() }, UpdateFunc: func(_, _ any) { w.poke() }, DeleteFunc: func(any) { w.poke() },
	})
	if err != nil {
		return err
	}
	defer watch.Stop()
	if !watch.WaitForSync(ctx) {
		return nil
	}
	stores := watch.Stores()
	w.mu.Lock()
	w.store = stores
	w.mu.Unlock()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		w.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		case <-t.C:
		}
	}
}

// object is one ElasticScaler from the cache.
type object struct {
	u   *unstructured.Unstructured
	es  esv1.ElasticScaler
	err error // decoding
}

func (o *object) key() string { return o.u.GetNamespace() + "/" + o.u.GetName() }

func (w *StatusWriter) objects() []*object {
	w.mu.Lock()
	stores := w.store
	w.mu.Unlock()
	var out []*object
	for _, st := range stores {
		for _, it := range st.List() {
			u, ok := it.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			o := &object{u: u}
			if es, err := decode[esv1.ElasticScaler](u); err != nil {
				o.err = err
			} else {
				o.es = *es
			}
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// pass brings every object's status up to date (validation on the leader only).
func (w *StatusWriter) pass(ctx context.Context) {
	objs := w.objects()
	var valid map[string][]string
	if w.leader.Load() {
		valid = w.validate(ctx, objs)
	}
	live := map[string]bool{}
	for _, o := range objs {
		live[o.key()] = true
		var msgs *[]string
		if valid != nil {
			m := valid[o.key()]
			msgs = &m
		}
		w.sync(ctx, o, msgs)
	}
	w.mu.Lock()
	for k := range w.state {
		if !live[k] {
			delete(w.state, k)
		}
	}
	for p := range w.obs {
		if ns, name, _ := strings.Cut(p, "."); !live[ns+"/"+name] {
			delete(w.obs, p)
			delete(w.obsSeq, p)
		}
	}
	w.mu.Unlock()
}

// validate runs the checks of every object: the admission checks and the translation
// (TranslateElasticScaler), the file's checks of the policies together
// ((*config.Config).WithPolicies: the file wins, then the older object), one ElasticScaler per
// target (the older wins), the algorithm registered, and the cluster checks: the target
// exists, and a StateTrigger's target (its Tidal) has status.replicas or status.desiredReplicas.
// The result maps each object's key to its reasons, none when valid.
func (w *StatusWriter) validate(ctx context.Context, objs []*object) map[string][]string {
	out := map[string][]string{}
	add := func(k string, msg ...string) { out[k] = append(out[k], msg...) }
	var ops []config.ObjectPolicy
	var sig strings.Builder // the objects translated, for fileChecks' cache
	for _, o := range objs {
		if o.err != nil {
			add(o.key(), "decode: "+o.err.Error())
			continue
		}
		op, _, err := TranslateElasticScaler(&o.es)
		switch {
		case errors.Is(err, ErrStateTrigger):
		case err != nil:
			add(o.key(), objectMessages(err)...)
		default:
			if _, perr := policy.Parse(op.Policy.Algorithm, op.Policy.Model); perr != nil {
				alg := op.Policy.Algorithm
				if mt := o.es.Spec.Trigger.MetricsTrigger; mt != nil {
					alg = mt.ScalingAlgorithm
				}
				add(o.key(), fmt.Sprintf("spec.trigger.metricsTrigger.scalingAlgorithm: %q is not a registered algorithm: %v", alg, perr))
				continue
			}
			ops = append(ops, op)
			fmt.Fprintf(&sig, "|%s@%s", o.key(), o.u.GetResourceVersion())
		}
	}
	// One ElasticScaler per target: the older (then the smaller name) keeps it.
	byTarget := map[string][]*object{}
	for _, o := range objs {
		if o.err != nil {
			continue
		}
		byTarget[targetKey(&o.es)] = append(byTarget[targetKey(&o.es)], o)
	}
	for _, os := range byTarget {
		if len(os) < 2 {
			continue
		}
		sort.Slice(os, func(i, j int) bool {
			ti, tj := os[i].es.CreationTimestamp.Time, os[j].es.CreationTimestamp.Time
			if !ti.Equal(tj) {
				return ti.Before(tj)
			}
			return os[i].key() < os[j].key()
		})
		for _, o := range os[1:] {
			add(o.key(), fmt.Sprintf("spec.targetRef: %s is already managed by ElasticScaler %s (older): one ElasticScaler per target",
				describeRef(&o.es), os[0].key()))
		}
	}
	for k, msgs := range w.fileChecks(ops, sig.String()) {
		add(k, msgs...)
	}
	for _, o := range objs {
		if o.err != nil || len(o.es.Spec.TargetRef.Name) == 0 {
			continue
		}
		add(o.key(), w.clusterChecks(ctx, o)...)
	}
	if w.hpaProblems != nil {
		for k, msg := range w.hpaProblems() {
			if _, known := out[k]; known || slices.ContainsFunc(objs, func(o *object) bool { return o.key() == k }) {
				add(k, "the Kubernetes HPA of the HPA algorithm: "+msg)
			}
		}
	}
	return out
}

// fileChecks are WithPolicies' rejections by object key, cached while the objects and the file
// stay the same.
func (w *StatusWriter) fileChecks(ops []config.ObjectPolicy, sig string) map[string][]string {
	file := w.file()
	if file == nil || len(ops) == 0 {
		return nil
	}
	key := fmt.Sprintf("%p%s", file, sig)
	w.mu.Lock()
	defer w.mu.Unlock()
	if key == w.wpKey {
		return w.wpErrs
	}
	_, errs := file.WithPolicies(ops)
	res := map[string][]string{}
	for _, err := range errs {
		var oe *config.ObjectError
		if !errors.As(err, &oe) {
			continue
		}
		k := strings.TrimPrefix(oe.Source, "elasticscaler ")
		res[k] = append(res[k], objectMessages(err)...)
	}
	w.wpKey, w.wpErrs = key, res
	return res
}

// clusterChecks are the checks that read the cluster, cached for recheck when they pass (for
// interval when they fail) and redone when the object changes. A failure to read other than
// not-found keeps the previous result.
func (w *StatusWriter) clusterChecks(ctx context.Context, o *object) []string {
	w.mu.Lock()
	st := w.stateOf(o.key())
	rv, msgs, at := st.checkRV, st.checkMsgs, st.checked
	w.mu.Unlock()
	ttl := w.recheck
	if len(msgs) > 0 {
		ttl = w.interval
	}
	if rv == o.u.GetResourceVersion() && w.now().Sub(at) < ttl {
		return msgs
	}
	t := targetOf(&o.es)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := w.get(cctx, t)
	var res []string
	var re *RefError
	switch {
	case apierrors.IsNotFound(err):
		res = []string{fmt.Sprintf("spec.targetRef: %s not found", describeRef(&o.es))}
	case errors.As(err, &re):
		res = []string{fmt.Sprintf("spec.targetRef: %s: %v", describeRef(&o.es), re.Err)}
	case err != nil:
		w.log.Warn("cannot check an ElasticScaler's target; keeping the last result", "object", o.key(), "err", err)
		return msgs
	case o.es.Spec.Trigger.Type == esv1.StateTriggerType:
		_, hasD, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "desiredReplicas")
		_, hasR, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "replicas")
		if !hasD && !hasR {
			res = []string{fmt.Sprintf("spec.targetRef: %s has neither status.replicas nor status.desiredReplicas (a StateTrigger's target gives the replicas in its status)", describeRef(&o.es))}
		}
	}
	w.mu.Lock()
	st.checkRV, st.checkMsgs, st.checked = o.u.GetResourceVersion(), res, w.now()
	w.mu.Unlock()
	return res
}

// stateOf is the object's state; under w.mu.
func (w *StatusWriter) stateOf(k string) *objState {
	st := w.state[k]
	if st == nil {
		st = &objState{}
		w.state[k] = st
	}
	return st
}

func targetOf(es *esv1.ElasticScaler) config.Target {
	r := es.Spec.TargetRef
	ns := r.Namespace
	if ns == "" {
		ns = es.Namespace
	}
	return config.Target{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: ns, Name: r.Name}
}

func targetKey(es *esv1.ElasticScaler) string {
	t := targetOf(es)
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	return strings.ToLower(gv.Group+"/"+t.Kind) + "/" + t.Namespace + "/" + t.Name
}

func describeRef(es *esv1.ElasticScaler) string {
	t := targetOf(es)
	return fmt.Sprintf("%s %s %s/%s", t.APIVersion, t.Kind, t.Namespace, t.Name)
}

// objectMessages are the messages of an ObjectError (or several joined), without the object's
// name: path: error.
func objectMessages(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, objectMessages(e)...)
		}
		return out
	}
	var oe *config.ObjectError
	if errors.As(err, &oe) {
		if oe.Path == "" {
			return []string{oe.Err.Error()}
		}
		return []string{oe.Path + ": " + oe.Err.Error()}
	}
	return []string{err.Error()}
}

// Observe records a decision of an object's policy and its Events; it does not block. A
// decision of a file policy, or of an object not in the cache, is not the writer's.
func (w *StatusWriter) Observe(o Decision) {
	ns, name, ok := strings.Cut(o.Policy, ".")
	if !ok {
		return
	}
	if f := w.file(); f != nil {
		if _, isFile := f.PolicyByName(o.Policy); isFile {
			return
		}
	}
	u := w.cached(ns, name)
	if u == nil {
		return
	}
	w.mu.Lock()
	w.seq++
	oc := o
	w.obs[o.Policy], w.obsSeq[o.Policy] = &oc, w.seq
	w.mu.Unlock()
	w.events(u, o)
	w.poke()
}

// cached is the object from the informer's cache, or nil.
func (w *StatusWriter) cached(ns, name string) *unstructured.Unstructured {
	w.mu.Lock()
	stores := w.store
	w.mu.Unlock()
	return cached(stores, ns+"/"+name)
}

func objectRef(u *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: esv1.SchemeGroupVersion.String(), Kind: "ElasticScaler",
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
}

// events records a decision's Events on the object: Scaled on a change written, WouldScale in
// shadow mode, ScaleFailed on an error. The recorder aggregates repeats.
func (w *StatusWriter) events(u *unstructured.Unstructured, o Decision) {
	if w.rec == nil {
		return
	}
	ref := objectRef(u)
	out := o
	in := decisionInputs(&o)
	switch {
	case o.Err != nil:
		w.rec.Eventf(ref, corev1.EventTypeWarning, esv1.EventScaleFailed, "policy %s (%s, mode %s): %v", o.Policy, o.Algorithm, o.Mode, o.Err)
	case out.Written && o.Mode == config.ModeHPAFloor:
		w.rec.Eventf(ref, corev1.EventTypeNormal, esv1.EventScaled, "policy %s (%s): %s minReplicas raised for %d replicas (current %d, %s); %s",
			o.Policy, o.Algorithm, out.Object, out.After, out.Before, out.Reason, in)
	case out.Written:
		w.rec.Eventf(ref, corev1.EventTypeNormal, esv1.EventScaled, "policy %s (%s): replicas %d -> %d (%s); %s",
			o.Policy, o.Algorithm, out.Before, out.After, out.Reason, in)
	case o.Mode == config.ModeShadow && out.Held == "" && out.After != out.Before:
		w.rec.Eventf(ref, corev1.EventTypeNormal, esv1.EventWouldScale, "policy %s (%s, mode shadow, nothing written): would scale %d -> %d (%s); %s",
			o.Policy, o.Algorithm, out.Before, out.After, out.Reason, in)
	}
}

// sync writes the object's status when it differs from what it should be: valid (nil when not
// the leader) gives Validated, the last decision of its policy the rest.
func (w *StatusWriter) sync(ctx context.Context, o *object, valid *[]string) {
	if o.err != nil { // reported by validate; a status cannot be written on what does not decode
		return
	}
	k := o.key()
	pol := PolicyName(o.u.GetNamespace(), o.u.GetName())
	w.mu.Lock()
	st := w.stateOf(k)
	obs, seq := w.obs[pol], w.obsSeq[pol]
	if seq <= st.applied {
		obs = nil
	}
	last := st.lastWrite
	w.mu.Unlock()

	mutate := func(s *esv1.ElasticScalerStatus, gen int64) {
		if valid != nil {
			setValidated(s, *valid, gen)
			s.ObservedGeneration = gen
		}
		if obs != nil {
			applyDecision(s, obs, gen, objectEndpoints(&o.es))
		}
	}
	want := *o.es.Status.DeepCopy()
	mutate(&want, o.u.GetGeneration())
	if reflect.DeepEqual(want, o.es.Status) {
		if obs != nil {
			w.mu.Lock()
			st.applied = seq
			w.mu.Unlock()
		}
		w.validationEvent(o.u, st, valid)
		return
	}
	if wait := w.interval - w.now().Sub(last); wait > 0 {
		time.AfterFunc(wait, w.poke) // rate-limited: written by the pass after the wait
		return
	}
	es := w.dyn.Resource(Resource).Namespace(o.u.GetNamespace())
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := es.Get(ctx, o.u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		typed, err := decode[esv1.ElasticScaler](cur)
		if err != nil {
			return err
		}
		s := *typed.Status.DeepCopy()
		mutate(&s, cur.GetGeneration())
		if reflect.DeepEqual(s, typed.Status) {
			return nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
		if err != nil {
			return err
		}
		cur.Object["status"] = m
		_, err = es.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	w.mu.Lock()
	st.lastWrite = w.now()
	if err == nil && obs != nil {
		st.applied = seq
	}
	w.mu.Unlock()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			w.log.Warn("cannot write an ElasticScaler's status", "object", k, "err", err)
		}
		return
	}
	w.log.Debug("ElasticScaler status written", "object", k)
	w.validationEvent(o.u, st, valid)
}

// validationEvent records ValidationFailed when the object became invalid or its reasons
// changed (the leader only).
func (w *StatusWriter) validationEvent(u *unstructured.Unstructured, st *objState, valid *[]string) {
	if valid == nil || w.rec == nil {
		return
	}
	msg := validationMessage(*valid)
	w.mu.Lock()
	changed := st.eventMsg != msg
	st.eventMsg = msg
	w.mu.Unlock()
	if changed && msg != "" {
		w.rec.Event(objectRef(u), corev1.EventTypeWarning, esv1.EventValidationFailed, msg)
	}
}
