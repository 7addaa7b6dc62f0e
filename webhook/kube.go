package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"

	"github.com/debi-scaler/debi/config"
)

// AnnotationBaseMinReplicas records, on an HPA the webhook raises, the minReplicas it had
// before: the predictive floor never goes below it, and can return to it.
const AnnotationBaseMinReplicas = "debi.io/base-min-replicas"

// KubeActuator writes through the scale subresource of any kind that has one (Deployment,
// StatefulSet, ReplicaSet, custom resources with a scale subresource), found through discovery.
type KubeActuator struct {
	dyn    dynamic.Interface
	kube   kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// Backoff of conflict retries (retry.DefaultRetry).
	Backoff wait.Backoff
	// beforeWrite, when set, runs between the read and the write of each attempt (tests use it
	// to provoke real conflicts).
	beforeWrite func(attempt int)
}

// NewKubeActuator builds the clients from a rest.Config.
func NewKubeActuator(rc *rest.Config) (*KubeActuator, error) {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &KubeActuator{dyn: dyn, kube: kube, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		Backoff: retry.DefaultRetry}, nil
}

// Kube returns the typed clientset.
func (k *KubeActuator) Kube() kubernetes.Interface { return k.kube }

// Dynamic returns the dynamic client.
func (k *KubeActuator) Dynamic() dynamic.Interface { return k.dyn }

func (k *KubeActuator) resource(t config.Target) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return nil, &Error{http.StatusUnprocessableEntity, fmt.Errorf("target %s: api_version: %w", t, err)}
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: t.Kind}
	m, err := k.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		k.mapper.Reset() // a CRD installed since the last discovery
		m, err = k.mapper.RESTMapping(gk, gv.Version)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, &Error{http.StatusUnprocessableEntity, fmt.Errorf("target %s: %w", t, err)}
		}
		return nil, err
	}
	return k.dyn.Resource(m.Resource).Namespace(t.Namespace), nil
}

// GetScale implements Actuator.
func (k *KubeActuator) GetScale(ctx context.Context, t config.Target) (ScaleInfo, error) {
	r, err := k.resource(t)
	if err != nil {
		return ScaleInfo{}, err
	}
	u, err := r.Get(ctx, t.Name, metav1.GetOptions{}, "scale")
	if err != nil {
		return ScaleInfo{}, err
	}
	n, err := specReplicas(u)
	return ScaleInfo{Replicas: n, UID: u.GetUID(), obj: u}, err
}

func specReplicas(u *unstructured.Unstructured) (int32, error) {
	n, _, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return 0, fmt.Errorf("scale of %s: spec.replicas: %w", u.GetName(), err)
	}
	return int32(n), nil
}

// SetReplicas implements Actuator: write the absolute count with the resourceVersion of the
// decision's read (optimistic concurrency); on conflict re-read and write again.
func (k *KubeActuator) SetReplicas(ctx context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error) {
	res := WriteResult{Object: t.Kind + "/" + t.Name}
	r, err := k.resource(t)
	if err != nil {
		return res, err
	}
	attempt := 0
	err = retry.RetryOnConflict(k.Backoff, func() error {
		attempt++
		var u *unstructured.Unstructured
		if attempt == 1 && cur.obj != nil {
			u = cur.obj.DeepCopy() // the decision's own read: write only if nothing changed since
		} else if u, err = r.Get(ctx, t.Name, metav1.GetOptions{}, "scale"); err != nil {
			return err
		}
		before, err := specReplicas(u)
		if err != nil {
			return err
		}
		res.Before, res.After = before, before
		if before == n {
			return nil
		}
		if err := unstructured.SetNestedField(u.Object, int64(n), "spec", "replicas"); err != nil {
			return err
		}
		if k.beforeWrite != nil {
			k.beforeWrite(attempt)
		}
		if _, err := r.Update(ctx, u, metav1.UpdateOptions{FieldManager: "debi-webhook"}, "scale"); err != nil {
			if apierrors.IsConflict(err) {
				res.Conflicts++
			}
			return err
		}
		res.After = n
		return nil
	})
	return res, err
}

// SetHPAFloor implements Actuator: the HPA whose scaleTargetRef is t gets
// minReplicas = max(n, its base minimum), capped at its maxReplicas. The base minimum is the
// minReplicas it had when debi first touched it, kept in an annotation, so the floor falls back
// when the forecast does.
func (k *KubeActuator) SetHPAFloor(ctx context.Context, t config.Target, n int32) (WriteResult, error) {
	res := WriteResult{}
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	hpas := k.kube.AutoscalingV2().HorizontalPodAutoscalers(t.Namespace)
	attempt := 0
	err := retry.RetryOnConflict(k.Backoff, func() error {
		attempt++
		list, err := hpas.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var h *autoscalingv2.HorizontalPodAutoscaler
		for i := range list.Items {
			ref := list.Items[i].Spec.ScaleTargetRef
			rgv, _ := schema.ParseGroupVersion(ref.APIVersion)
			if ref.Name == t.Name && strings.EqualFold(ref.Kind, t.Kind) && rgv.Group == gv.Group {
				h = &list.Items[i]
				break
			}
		}
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

// kubeError maps an API error onto Alertmanager's retry contract: an unknown target is
// permanent (4xx); conflicts that outlived their retries, timeouts, throttling, authorization
// (fixable by an operator) and anything unexpected are retried (5xx).
func kubeError(what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	code := http.StatusInternalServerError
	switch {
	case apierrors.IsNotFound(err):
		code = http.StatusNotFound
	case apierrors.IsConflict(err), apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err):
		code = http.StatusServiceUnavailable
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	return &Error{code, fmt.Errorf("%s: %w", what, err)}
}
