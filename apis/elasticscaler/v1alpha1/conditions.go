package v1alpha1

// Condition reasons and Event reasons of ElasticScalers, besides ConditionValidated,
// ConditionMetricsPipeline, ConditionScalingCalculated, ReasonValidationFailed and
// ReasonMetricsPartialSuccess (types.go). debi's webhook writes them (elasticscaler/status.go).
const (
	// ReasonValid is the reason of Validated=True: the admission checks, the translation to a
	// policy and the controller's checks (target exists, one ElasticScaler per target,
	// algorithm registered, a StateTrigger's Tidal has a replica count) passed.
	ReasonValid = "Valid"

	// ReasonMetricsAvailable is the reason of MetricsPipeline=True: every input of the last
	// decision was read and fresh.
	ReasonMetricsAvailable = "MetricsAvailable"
	// ReasonMetricsUnavailable is the reason of MetricsPipeline=False when no input could be
	// read (Prometheus unreachable or not configured, or every query without a usable series).
	ReasonMetricsUnavailable = "MetricsUnavailable"

	// ReasonScalingCalculated is the reason of ScalingCalculated=True: the last decision gave
	// status.desiredReplicas.
	ReasonScalingCalculated = "DesiredReplicasCalculated"
	// ReasonScalingHeld is the reason of ScalingCalculated=False when the last decision kept the
	// size (an input missing or stale, the target paused); the message says why.
	ReasonScalingHeld = "ScalingHeld"
	// ReasonScaleFailed is the reason of ScalingCalculated=False when the last decision failed
	// (the target could not be read or written); the message has the error.
	ReasonScaleFailed = "ScaleFailed"
)

// Event reasons on ElasticScalers.
const (
	// EventScaled (Normal): the target's size (or its HPA's floor, mode hpa-floor) was changed.
	EventScaled = "Scaled"
	// EventWouldScale (Normal): mode shadow decided another size than the current one and wrote
	// nothing.
	EventWouldScale = "WouldScale"
	// EventScaleFailed (Warning): a decision failed.
	EventScaleFailed = "ScaleFailed"
	// EventValidationFailed (Warning): Validated became False, or its reasons changed.
	EventValidationFailed = ReasonValidationFailed
)
