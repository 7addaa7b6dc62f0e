// Package elasticscaler is the ElasticScaler feature (elasticscaler.io/v1alpha1, package apis):
// everything debi does with the objects besides running their policies.
//
//   - Translation (translate.go, translate_metrics.go for a MetricsTrigger's metrics,
//     translate_state.go for a StateTrigger): an object becomes a config.ObjectPolicy, checked
//     against the file by (*config.Config).WithPolicies. Package config is the file format only
//     and knows nothing of the API types.
//   - The object source (source.go): the objects watched, translated and delivered to the
//     exporter and the webhook (RunSource).
//   - The HPA owner (hpaowner.go): the Kubernetes HPA of an object whose algorithm is HPA.
//   - The status writer (status.go): the objects' conditions, decision fields and Events, from
//     the webhook's decisions as it reports them (Decision), never from the webhook's state.
//   - Admission (admission.go): the validating admission of ElasticScaler and Tidal objects,
//     served by the webhook's router (Admit).
//   - Typed decoding of the informers' unstructured objects (decode.go), written once.
//
// The webhook composes the parts on its informer cache and Leases; the exporter runs the source.
// The package imports neither of them.
package elasticscaler
