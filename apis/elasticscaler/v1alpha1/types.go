package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ElasticScaler scales one target (a Deployment, a StatefulSet, anything with a scale
// subresource, or — with a StateTrigger — an object such as a Tidal whose status gives the
// replicas) on metrics or on an external state.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=escaler,categories=debi
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Algorithm",type=string,JSONPath=`.spec.trigger.metricsTrigger.scalingAlgorithm`
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.debi.mode`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.debi.paused`
// +kubebuilder:printcolumn:name="Paused-Replicas",type=integer,JSONPath=`.spec.debi.pausedReplicas`,priority=1
// +kubebuilder:printcolumn:name="Validated",type=string,JSONPath=`.status.conditions[?(@.type=="Validated")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ElasticScaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ElasticScalerSpec `json:"spec"`
	// +optional
	Status ElasticScalerStatus `json:"status,omitempty"`
}

// ElasticScalerList is a list of ElasticScalers.
//
// +kubebuilder:object:root=true
type ElasticScalerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ElasticScaler `json:"items"`
}

// ElasticScalerSpec is what the guide's users write, plus debi's extension (spec.debi).
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.maxReplicas >= self.minReplicas",message="maxReplicas must be greater than or equal to minReplicas",fieldPath=`.maxReplicas`
type ElasticScalerSpec struct {
	// TargetRef is the scaled object: one ElasticScaler per target.
	TargetRef TargetRef `json:"targetRef"`
	// MinReplicas is the lower bound of the replicas (default 1 for a MetricsTrigger).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper bound of the replicas; required for a MetricsTrigger, optional
	// for a StateTrigger (whose external state gives the replicas).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// Trigger says what drives the scaling: metrics or an external state.
	Trigger Trigger `json:"trigger"`
	// Debi is debi's extension of the Elastic Scaler API (not in the guide): how debi acts on
	// this target and which forecaster its predictive algorithms use.
	// +optional
	Debi *DebiSpec `json:"debi,omitempty"`
}

// TargetRef names the scaled object.
type TargetRef struct {
	// APIVersion of the target, e.g. apps/v1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the target, e.g. Deployment.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the target.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the target; default the ElasticScaler's own. With the HPA algorithm it must
	// be the ElasticScaler's own namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// TriggerType is the kind of trigger.
// +kubebuilder:validation:Enum=MetricsTrigger;StateTrigger
type TriggerType string

const (
	// MetricsTriggerType scales on metrics with a scaling algorithm.
	MetricsTriggerType TriggerType = "MetricsTrigger"
	// StateTriggerType applies the replicas an external object's status gives.
	StateTriggerType TriggerType = "StateTrigger"
)

// Trigger is one of a MetricsTrigger or a StateTrigger, as Type says; only the sub-structure of
// that type may be set.
type Trigger struct {
	// Type is MetricsTrigger or StateTrigger.
	Type TriggerType `json:"type"`
	// MetricsTrigger is the configuration of Type MetricsTrigger.
	// +optional
	MetricsTrigger *MetricsTrigger `json:"metricsTrigger,omitempty"`
	// StateTrigger is the configuration of Type StateTrigger; it has no fields ({}).
	// +optional
	StateTrigger *StateTrigger `json:"stateTrigger,omitempty"`
}

// Algorithm names recognised by debi (case-insensitive); any other name must be registered.
const (
	AlgorithmHPA    = "HPA"
	AlgorithmAPA    = "APA"
	AlgorithmDebi   = "DEBI"
	AlgorithmBudget = "BUDGET"
)

// MetricsTrigger scales on metrics.
type MetricsTrigger struct {
	// ScalingAlgorithm is the algorithm's name, case-insensitive: HPA (a Kubernetes HPA created
	// and owned for this object), APA (the default when empty), DEBI, BUDGET or a registered name.
	// +optional
	ScalingAlgorithm string `json:"scalingAlgorithm,omitempty"`
	// AlgorithmConfig holds the algorithm's parameters, as strings (e.g. upTolerance: "0.1").
	// +optional
	AlgorithmConfig map[string]string `json:"algorithmConfig,omitempty"`
	// Metrics are the algorithm's inputs; at least one.
	// +optional
	Metrics []MetricSpec `json:"metrics,omitempty"`
}

// StateTrigger applies the replicas the target's status gives (status.desiredReplicas, or
// status.replicas). It has no fields: write stateTrigger: {}.
type StateTrigger struct{}

// MetricSourceType is the kind of metric.
// +kubebuilder:validation:Enum=Resource;External;ExternalServer;Custom
type MetricSourceType string

const (
	// ResourceMetricSourceType is a per-pod resource (cpu, memory) from metrics.k8s.io.
	ResourceMetricSourceType MetricSourceType = "Resource"
	// ExternalMetricSourceType is a metric from external.metrics.k8s.io.
	ExternalMetricSourceType MetricSourceType = "External"
	// ExternalServerMetricSourceType is a value an HTTP(S) endpoint returns for a query (PromQL).
	ExternalServerMetricSourceType MetricSourceType = "ExternalServer"
	// CustomMetricSourceType is a metric from custom.metrics.k8s.io (pods or one object).
	CustomMetricSourceType MetricSourceType = "Custom"
)

// MetricSpec is one metric; only the sub-structure of its Type may be set.
type MetricSpec struct {
	// Type is Resource, External, ExternalServer or Custom.
	Type MetricSourceType `json:"type"`
	// +optional
	Resource *ResourceMetricSource `json:"resource,omitempty"`
	// +optional
	External *ExternalMetricSource `json:"external,omitempty"`
	// +optional
	ExternalServer *ExternalServerMetricSource `json:"externalServer,omitempty"`
	// +optional
	Custom *CustomMetricSource `json:"custom,omitempty"`
}

// ResourceMetricSource is a resource of the target's pods, as HPA's resource metric.
type ResourceMetricSource struct {
	// MetricsName is the resource, e.g. cpu or memory.
	MetricsName string `json:"metricsName"`
	// Target is Utilization (averageUtilization) or AverageValue (averageValue).
	Target MetricTarget `json:"target"`
}

// ExternalMetricSource is a metric of external.metrics.k8s.io, as HPA's external metric.
type ExternalMetricSource struct {
	// Metric names the metric and selects its series.
	Metric MetricIdentifier `json:"metric"`
	// Target is Value (value) or AverageValue (averageValue).
	Target MetricTarget `json:"target"`
}

// CustomMetricSource is a metric of custom.metrics.k8s.io: of the target's pods (HPA's pods
// metric, target AverageValue) when DescribedObject is empty, or of DescribedObject (HPA's
// object metric, target Value or AverageValue).
type CustomMetricSource struct {
	// Metric names the metric and selects its series.
	Metric MetricIdentifier `json:"metric"`
	// DescribedObject is the object the metric describes; empty for a pods metric.
	// +optional
	DescribedObject *CrossVersionObjectReference `json:"describedObject,omitempty"`
	// Target is the metric's target value.
	Target MetricTarget `json:"target"`
}

// ExternalServerMetricSource is a value an HTTP(S) metrics service (e.g. Prometheus' query API)
// returns for Query. Not available with the HPA algorithm.
type ExternalServerMetricSource struct {
	// MetricsName names the metric in the algorithm's inputs and in status.
	MetricsName string `json:"metricsName"`
	// Target is the target value of the metric, a decimal number as a string (e.g. "100").
	Target string `json:"target"`
	// Endpoint is the service's URL, e.g. http://prometheus.monitoring.svc:9090/api/v1/query.
	Endpoint string `json:"endpoint"`
	// Query is sent to Endpoint (PromQL for Prometheus) and must return one number.
	Query string `json:"query"`
	// Protocol is http or https (default: Endpoint's scheme).
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// MetricIdentifier names a metric and selects its series, as HPA's.
type MetricIdentifier struct {
	// Name of the metric.
	Name string `json:"name"`
	// Selector selects the metric's series by label; empty selects every series.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// CrossVersionObjectReference names an object, as HPA's.
type CrossVersionObjectReference struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
}

// MetricTargetType is the kind of a metric's target.
// +kubebuilder:validation:Enum=Utilization;AverageValue;Value
type MetricTargetType string

const (
	// UtilizationMetricType is a percentage of the pods' requests (Resource only).
	UtilizationMetricType MetricTargetType = "Utilization"
	// AverageValueMetricType is the value per pod.
	AverageValueMetricType MetricTargetType = "AverageValue"
	// ValueMetricType is the value of the metric itself.
	ValueMetricType MetricTargetType = "Value"
)

// MetricTarget is a metric's target value, as HPA's: Type says which field is set.
type MetricTarget struct {
	Type MetricTargetType `json:"type"`
	// +optional
	Value *resource.Quantity `json:"value,omitempty"`
	// +optional
	AverageValue *resource.Quantity `json:"averageValue,omitempty"`
	// AverageUtilization is a percentage of the pods' requests.
	// +optional
	AverageUtilization *int32 `json:"averageUtilization,omitempty"`
}

// DebiMode is how debi acts on the target.
// +kubebuilder:validation:Enum=act;hpa-floor;shadow
type DebiMode string

const (
	// DebiModeAct patches the target's scale subresource.
	DebiModeAct DebiMode = "act"
	// DebiModeHPAFloor raises an HPA's minReplicas to the decision.
	DebiModeHPAFloor DebiMode = "hpa-floor"
	// DebiModeShadow decides and publishes, and writes nothing.
	DebiModeShadow DebiMode = "shadow"
)

// DebiSpec is debi's extension (spec.debi): fields the guide does not have. Every field is
// optional and takes debi's default (docs/configuration.md) when empty.
type DebiSpec struct {
	// Mode is act (default), hpa-floor or shadow.
	// +optional
	Mode DebiMode `json:"mode,omitempty"`
	// Paused stops every write of the webhook for this object's policy (webhook.policies[].paused):
	// decisions are still made, logged and published.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// PausedReplicas pauses the policy held at this many replicas, as KEDA's
	// autoscaling.keda.sh/paused-replicas annotation: the webhook scales the target to it
	// (mode act) and makes no load decision while it is set, whatever spec.debi.paused says.
	// It may lie outside minReplicas–maxReplicas (0 stops the workload), as KEDA's does.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PausedReplicas *int32 `json:"pausedReplicas,omitempty"`
	// Model is the forecaster of the DEBI and BUDGET algorithms, e.g. holtwinters (DEBI's
	// default) or auto (BUDGET's: whichever of Holt-Winters, ARIMA and the last value has
	// forecast the recent history best).
	// +optional
	Model string `json:"model,omitempty"`
	// FallbackModel is a model that forecasts while model waits for the history it needs
	// (holtwinters: two days), e.g. arima (policies[].fallback_model). auto needs none.
	// +optional
	FallbackModel string `json:"fallbackModel,omitempty"`
	// LeadTime is the actuation delay the forecast must cover (default 2m).
	// +optional
	LeadTime *metav1.Duration `json:"leadTime,omitempty"`
	// HistoryStep is the sample period of the model history (default 5m).
	// +optional
	HistoryStep *metav1.Duration `json:"historyStep,omitempty"`
	// EVT is the peaks-over-threshold fit of the high-water load W3 (policies[].evt).
	// +optional
	EVT *DebiEVT `json:"evt,omitempty"`
	// Budget is the overload budget of the BUDGET algorithm (policies[].budget and
	// policies[].scaling.budget).
	// +optional
	Budget *DebiBudget `json:"budget,omitempty"`
}

// DebiEVT is spec.debi.evt: the high-water level's fit. Numbers are decimal strings, as in
// algorithmConfig (no floats in the schema).
type DebiEVT struct {
	// Tau is the share of the history above the threshold (evt.tau, default 0.2).
	// +optional
	Tau string `json:"tau,omitempty"`
	// Q is the exceedance probability of W3 (evt.q, default 0.1); below tau.
	// +optional
	Q string `json:"q,omitempty"`
	// MinExcesses is the fewest excesses a fit needs (evt.min_excesses).
	// +optional
	MinExcesses *int32 `json:"minExcesses,omitempty"`
	// Method is the fit: moments or grimshaw (evt.method).
	// +optional
	Method string `json:"method,omitempty"`
}

// DebiBudget is spec.debi.budget: the SRE's overload budget. Numbers are decimal strings.
type DebiBudget struct {
	// OverloadBudget is the share of time the workload may run above SLAUtilization, e.g.
	// "0.01" (budget.overload_budget).
	// +optional
	OverloadBudget string `json:"overloadBudget,omitempty"`
	// SLAUtilization is u_sla, the utilization above which a step is overloaded, e.g. "0.9"
	// (scaling.budget.u_sla).
	// +optional
	SLAUtilization string `json:"slaUtilization,omitempty"`
	// Hold is the least time between a change of size and a scale-down (scaling.budget.hold);
	// under the priced rule, the longest hold the price may choose.
	// +optional
	Hold *metav1.Duration `json:"hold,omitempty"`
	// Rule is how the size is chosen (scaling.budget.rule): priced (a price on each overloaded
	// tick over the lead ahead; the default) or quantile (every tick covered at one calibrated
	// level).
	// +kubebuilder:validation:Enum=quantile;priced
	// +optional
	Rule string `json:"rule,omitempty"`
	// Idle is what a quiet tick (served at min_replicas whatever overload costs) does to the
	// price (scaling.budget.idle): earn (lowers it, as any tick served does; the default) or
	// hold (leaves it where the last load set it, so a quiet night or weekend earns nothing).
	// +kubebuilder:validation:Enum=earn;hold
	// +optional
	Idle string `json:"idle,omitempty"`
}

// Condition types of ElasticScalerStatus.Conditions.
const (
	// ConditionValidated is True when the spec and the cluster checks passed (reason
	// ValidationFailed, with the cause in the message, when not).
	ConditionValidated = "Validated"
	// ConditionMetricsPipeline reports the last metric collection (reason MetricsPartialSuccess
	// when some metrics failed).
	ConditionMetricsPipeline = "MetricsPipeline"
	// ConditionScalingCalculated reports the last decision.
	ConditionScalingCalculated = "ScalingCalculated"

	// ReasonValidationFailed is the reason of Validated=False.
	ReasonValidationFailed = "ValidationFailed"
	// ReasonMetricsPartialSuccess is the reason of a MetricsPipeline where some metrics failed.
	ReasonMetricsPartialSuccess = "MetricsPartialSuccess"
)

// ElasticScalerStatus is what debi reports about the object.
type ElasticScalerStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Validated, MetricsPipeline and ScalingCalculated.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// CurrentReplicas is the target's replicas when last observed.
	// +optional
	CurrentReplicas *int32 `json:"currentReplicas,omitempty"`
	// DesiredReplicas is the last decision.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
	// LastScaleTime is when the target was last scaled.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// LastLoad is the load W of the last decision (debi's METHOD), a decimal number.
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	// +optional
	LastLoad string `json:"lastLoad,omitempty"`
	// LastTarget is the per-pod target of the last decision, a decimal number.
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	// +optional
	LastTarget string `json:"lastTarget,omitempty"`
	// PausedReplicas is the count the last decision held the target at (spec.debi.pausedReplicas,
	// as KEDA's status.pausedReplicaCount); unset when the policy is not paused at a count.
	// +optional
	PausedReplicas *int32 `json:"pausedReplicas,omitempty"`
}
