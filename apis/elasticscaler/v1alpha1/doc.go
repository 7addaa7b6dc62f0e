// Package v1alpha1 holds the ElasticScaler API (elasticscaler.io/v1alpha1) as the Elastic Scaler
// guide describes it, so that Elastic Scaler users' manifests decode into debi unchanged, plus
// debi's own extension under spec.debi. See docs/elastic-scaler.md for which fields debi honours.
//
// Work in progress: the types, the CRD (deploy/crds/) and the admission checks (Validate) exist;
// no controller or webhook serves them yet.
//
// +kubebuilder:object:generate=true
// +groupName=elasticscaler.io
package v1alpha1
