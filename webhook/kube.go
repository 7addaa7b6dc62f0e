package webhook

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/kube"
)

// AnnotationBaseMinReplicas records, on an HPA the webhook raises, the minReplicas it had
// before: the predictive floor never goes below it, and can return to it.
const AnnotationBaseMinReplicas = "debi.io/base-min-replicas"

// KubeActuator writes through the scale subresource of any kind that has one (Deployment,
// StatefulSet, ReplicaSet, custom resources with a scale subresource), found through discovery.
type KubeActuator struct {
	dyn    dynamic.Interface
	meta   metadata.Interface
	kube   kubernetes.Interface
	mapper kube.Mapper
	// Backoff of conflict retries (retry.DefaultRetry).
	Backoff wait.Backoff
	// beforeWrite, when set, runs between the read and the write of each attempt (tests use it
	// to provoke real conflicts); SetReplicas passes its write count since the actuator was
	// built, 1 for the first.
	beforeWrite func(attempt int)
	writes      atomic.Int64
}

// NewKubeActuator builds the clients from a rest.Config (internal/kube's, and the metadata
// client).
func NewKubeActuator(rc *rest.Config) (*KubeActuator, error) {
	c, err := kube.NewClients(rc)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &KubeActuator{dyn: c.Dynamic, meta: md, kube: c.Kubernetes, mapper: c.Mapper, Backoff: retry.DefaultRetry}, nil
}

// Kube returns the typed clientset.
func (k *KubeActuator) Kube() kubernetes.Interface { return k.kube }

// Dynamic returns the dynamic client.
func (k *KubeActuator) Dynamic() dynamic.Interface { return k.dyn }

func (k *KubeActuator) resource(t config.Target) (dynamic.ResourceInterface, error) {
	gvr, err := k.gvr(t)
	if err != nil {
		return nil, err
	}
	return k.dyn.Resource(gvr).Namespace(t.Namespace), nil
}

func (k *KubeActuator) gvr(t config.Target) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, &Error{http.StatusUnprocessableEntity, fmt.Errorf("target %s: api_version: %w", t, err)}
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: t.Kind}
	m, err := k.mapper.RESTMapping(gk, gv.Version) // rediscovers for a CRD installed since
	if err != nil {
		if meta.IsNoMatchError(err) {
			return schema.GroupVersionResource{}, &Error{http.StatusUnprocessableEntity, fmt.Errorf("target %s: %w", t, err)}
		}
		return schema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

// GetScale implements Actuator: the target's metadata (for debi.io/paused; the metadata client
// reads no spec), then its scale subresource.
func (k *KubeActuator) GetScale(ctx context.Context, t config.Target) (ScaleInfo, error) {
	gvr, err := k.gvr(t)
	if err != nil {
		return ScaleInfo{}, err
	}
	// The object itself (the same get permission as its metadata) for its annotations and its
	// ready count, then the scale subresource for the authoritative size.
	obj, err := k.dyn.Resource(gvr).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return ScaleInfo{}, err
	}
	u, err := k.dyn.Resource(gvr).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{}, "scale")
	if err != nil {
		return ScaleInfo{}, err
	}
	n, err := specReplicas(u)
	info := ScaleInfo{Replicas: n, UID: obj.GetUID(), Annotations: obj.GetAnnotations(), obj: u}
	info.Ready, info.ReadyKnown = readyReplicas(obj, t)
	return info, err
}

// readyReplicas is status.readyReplicas of the target, and whether the target says it. The
// workload controllers of apps/v1 omit the field at zero, so for their kinds an absent field
// in a status written for the current generation is 0 ready pods.
func readyReplicas(obj *unstructured.Unstructured, t config.Target) (int32, bool) {
	v, ok, err := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
	if err == nil && ok && v >= 0 && v <= math.MaxInt32 {
		return int32(v), true
	}
	if err != nil || ok || t.Group() != "apps" {
		return 0, false
	}
	if og, ok, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); ok && og == obj.GetGeneration() {
		return 0, true
	}
	return 0, false
}

func specReplicas(u *unstructured.Unstructured) (int32, error) {
	n, _, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return 0, fmt.Errorf("scale of %s: spec.replicas: %w", u.GetName(), err)
	}
	return int32(n), nil
}

// SetReplicas implements Actuator: write the absolute count once, with the resourceVersion of
// the decision's read (optimistic concurrency). A conflict is returned as it is: the size the
// decision rested on is gone, and the caller decides again from the new one.
func (k *KubeActuator) SetReplicas(ctx context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error) {
	res := WriteResult{Object: t.Kind + "/" + t.Name}
	r, err := k.resource(t)
	if err != nil {
		return res, err
	}
	u := cur.obj
	if u == nil {
		if u, err = r.Get(ctx, t.Name, metav1.GetOptions{}, "scale"); err != nil {
			return res, err
		}
	}
	u = u.DeepCopy()
	before, err := specReplicas(u)
	if err != nil {
		return res, err
	}
	res.Before, res.After = before, before
	if before == n {
		return res, nil
	}
	if err := unstructured.SetNestedField(u.Object, int64(n), "spec", "replicas"); err != nil {
		return res, err
	}
	if k.beforeWrite != nil {
		k.beforeWrite(int(k.writes.Add(1)))
	}
	if _, err := r.Update(ctx, u, metav1.UpdateOptions{FieldManager: "debi-webhook"}, "scale"); err != nil {
		if apierrors.IsConflict(err) {
			res.Conflicts++
		}
		return res, err
	}
	res.After = n
	return res, nil
}

// ScalingHPA implements Actuator.
func (k *KubeActuator) ScalingHPA(ctx context.Context, t config.Target) (string, error) {
	list, err := k.kube.AutoscalingV2().HorizontalPodAutoscalers(t.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	if h := hpaFor(list.Items, t); h != nil {
		return h.Name, nil
	}
	return "", nil
}

// hpaFor is the HPA among hpas whose scaleTargetRef is t (kind compared case-insensitively,
// group from the apiVersion, the version ignored).
func hpaFor(hpas []autoscalingv2.HorizontalPodAutoscaler, t config.Target) *autoscalingv2.HorizontalPodAutoscaler {
	for i := range hpas {
		ref := hpas[i].Spec.ScaleTargetRef
		rgv, _ := schema.ParseGroupVersion(ref.APIVersion)
		if ref.Name == t.Name && strings.EqualFold(ref.Kind, t.Kind) && rgv.Group == t.Group() {
			return &hpas[i]
		}
	}
	return nil
}

// GetTidal implements Actuator.
func (k *KubeActuator) GetTidal(ctx context.Context, r config.WatchResource, namespace, name string) (*unstructured.Unstructured, error) {
	gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
	return k.dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// SetHPAFloor implements Actuator: the HPA whose scaleTargetRef is t gets
// minReplicas = max(n, its base minimum), capped at its maxReplicas. The base minimum is the
// minReplicas it had when debi first touched it, kept in an annotation, so the floor falls back
// when the forecast does.
func (k *KubeActuator) SetHPAFloor(ctx context.Context, t config.Target, n int32) (WriteResult, error) {
	res := WriteResult{}
	hpas := k.kube.AutoscalingV2().HorizontalPodAutoscalers(t.Namespace)
	attempt := 0
	err := retry.RetryOnConflict(k.Backoff, func() error {
		attempt++
		list, err := hpas.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		h := hpaFor(list.Items, t)
		if h == nil {
			return &Error{http.StatusUnprocessableEntity, fmt.Errorf("mode hpa-floor: no HorizontalPodAutoscaler in namespace %s scales %s %s", t.Namespace, t.Kind, t.Name)}
		}
		res.Object = "HorizontalPodAutoscaler/" + h.Name
		cur := int32(1)
		if h.Spec.MinReplicas != nil {
			cur = *h.Spec.MinReplicas
		}
		base := cur
		if s, ok := h.Annotations[AnnotationBaseMinReplicas]; ok {
			if b, err := strconv.ParseInt(s, 10, 32); err == nil && b >= 1 {
				base = int32(b)
			}
		}
		floor := min(max(n, base), h.Spec.MaxReplicas)
		res.Before, res.After = cur, cur
		if floor == cur && h.Annotations[AnnotationBaseMinReplicas] != "" {
			return nil
		}
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[AnnotationBaseMinReplicas] = strconv.Itoa(int(base))
		h.Spec.MinReplicas = &floor
		if k.beforeWrite != nil {
			k.beforeWrite(attempt)
		}
		if _, err := hpas.Update(ctx, h, metav1.UpdateOptions{FieldManager: "debi-webhook"}); err != nil {
			if apierrors.IsConflict(err) {
				res.Conflicts++
			}
			return err
		}
		res.After = floor
		return nil
	})
	return res, err
}

// kubeError maps an API error onto Alertmanager's retry contract: what will fail again the
// same way is permanent (4xx: an unknown target, an invalid or refused request); conflicts that
// outlived their retries, timeouts, throttling, authorization (fixable by an operator) and
// anything unexpected are retried (5xx).
func kubeError(what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	code := http.StatusInternalServerError
	switch {
	case apierrors.IsNotFound(err), apierrors.IsGone(err):
		code = http.StatusNotFound
	case apierrors.IsInvalid(err):
		code = http.StatusUnprocessableEntity
	case apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err):
		code = http.StatusBadRequest
	case apierrors.IsConflict(err), apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err):
		code = http.StatusServiceUnavailable
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded),
		// client-go's rate limiter refuses to wait past the deadline without wrapping
		// context.DeadlineExceeded ("rate: Wait(n=1) would exceed context deadline").
		strings.Contains(err.Error(), "would exceed context deadline"):
		code = http.StatusGatewayTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		// The API server is down or restarting.
		code = http.StatusServiceUnavailable
	}
	return &Error{code, fmt.Errorf("%s: %w", what, err)}
}
