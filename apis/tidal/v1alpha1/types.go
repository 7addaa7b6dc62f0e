package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tidal gives a target's replicas by cron rules: the controller writes the replicas of the rule
// that fired last to status.desiredReplicas, and an ElasticScaler with a StateTrigger whose
// targetRef names this Tidal (bound by the labels elasticscaler.io/name and
// elasticscaler.io/namespace) applies them to spec.targetRef.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=debi
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Active Rule",type=string,JSONPath=`.status.activeRule`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tidal struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TidalSpec `json:"spec"`
	// +optional
	Status TidalStatus `json:"status,omitempty"`
}

// TidalList is a list of Tidals.
//
// +kubebuilder:object:root=true
type TidalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tidal `json:"items"`
}

// TidalSpec is the scaled target and the rules.
type TidalSpec struct {
	// TargetRef is the object whose replicas the rules give.
	TargetRef TargetRef `json:"targetRef"`
	// Triggers are the rules.
	Triggers Triggers `json:"triggers"`
}

// TargetRef names the scaled object.
type TargetRef struct {
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the target; default the Tidal's own.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Triggers are the Tidal's rules by kind; only time rules exist.
type Triggers struct {
	// Times are cron rules.
	// +optional
	Times *TimeTriggers `json:"times,omitempty"`
}

// TimeTriggers are cron rules.
type TimeTriggers struct {
	// Rules are evaluated together: the one that fired last gives the replicas.
	// +listType=map
	// +listMapKey=name
	Rules []TimeRule `json:"rules"`
}

// TimeRule sets the replicas at the times of a cron expression.
type TimeRule struct {
	// Name identifies the rule (status.activeRule).
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Cron is a six-field cron expression with seconds, optionally prefixed by CRON_TZ=<zone>,
	// e.g. "CRON_TZ=Asia/Shanghai 0 50 16 * * *".
	// +kubebuilder:validation:MinLength=1
	Cron string `json:"cron"`
	// Replicas is the target's replicas from the rule's time on.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// +optional
	Description string `json:"description,omitempty"`
}

// TidalStatus is what the Tidal controller reports.
type TidalStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DesiredReplicas is the replicas of the active rule, read by a StateTrigger.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
	// Replicas is the target's replicas when last observed.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// LastScheduleTime is when a rule last fired.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// ActiveRule is the name of the rule that fired last.
	// +optional
	ActiveRule string `json:"activeRule,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
