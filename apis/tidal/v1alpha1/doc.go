// Package v1alpha1 holds the Tidal API (tidal.io/v1alpha1) as the Elastic Scaler guide describes
// it: cron rules that give a target's replicas, written to status.desiredReplicas for an
// ElasticScaler's StateTrigger to apply.
//
// Work in progress: the types and the CRD (deploy/crds/) exist; no Tidal controller evaluates
// the rules yet.
//
// +kubebuilder:object:generate=true
// +groupName=tidal.io
package v1alpha1
